/* --reference: outputs saved from any framework (.npy or TensorProto .pb), one file per output
 * (NAME=FILE, or FILE for a model of one output) or a folder of NAME.npy / NAME.pb, matched to
 * the engine's outputs by the file names --output-dir writes. */
#define _XOPEN_SOURCE 700 /* realpath */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

/* The file name of output `index` in --output-dir (without .npy): its name with every character
 * outside A-Z a-z 0-9 . _ - as '_' ("output_<i>" for an empty name or one starting with '.'),
 * and "_<i>" added when an earlier output took that name. */
void cli_output_file_name(const tci_context *ctx, size_t index, char *buf, size_t size) {
    tci_tensor t;
    char name[256];
    for (size_t k = 0; k <= index; k++) {
        tci_context_output(ctx, k, &t);
        size_t n = 0;
        for (const char *c = t.name ? t.name : ""; *c && n + 1 < sizeof name; c++) {
            bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-';
            name[n++] = ok ? *c : '_';
        }
        name[n] = '\0';
        if (n == 0 || name[0] == '.') snprintf(name, sizeof name, "output_%zu", k);
        if (k == index) break;
    }
    snprintf(buf, size, "%s", name);
    char other[256];
    for (size_t k = 0; k < index; k++) {
        cli_output_file_name(ctx, k, other, sizeof other);
        if (strcmp(other, buf) == 0) {
            snprintf(buf, size, "%.200s_%zu", name, index);
            break;
        }
    }
}

bool cli_is_folder(const char *path) {
    struct stat st;
    size_t n = strlen(path);
    return (n && path[n - 1] == '/') || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

/* "y, w" (the outputs' names as --output-dir writes them, with suffix) into buf */
static const char *output_list(const tci_context *ctx, size_t n, const char *suffix, char *buf,
                               size_t size) {
    size_t pos = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && pos < size; i++) {
        char name[256];
        cli_output_file_name(ctx, i, name, sizeof name);
        int w = snprintf(buf + pos, size - pos, "%s%s%s", i ? ", " : "", name, suffix);
        if (w < 0) break;
        pos += (size_t)w;
    }
    return buf;
}

/* The output called name (its own name, or its --output-dir file name); n when none. */
static size_t find_output(const tci_context *ctx, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++) {
        tci_tensor t;
        tci_context_output(ctx, i, &t);
        if (t.name && strcmp(t.name, name) == 0) return i;
    }
    for (size_t i = 0; i < n; i++) {
        char file[256];
        cli_output_file_name(ctx, i, file, sizeof file);
        if (strcmp(file, name) == 0) return i;
    }
    return n;
}

static int set_path(cli_reference *r, size_t index, const char *path, const char *name) {
    if (r->paths[index]) {
        fprintf(stderr, "tcinfer: --reference gives output '%s' twice: '%s' and '%s'\n", name,
                r->paths[index], path);
        return EXIT_USAGE;
    }
    r->paths[index] = strdup(path);
    return r->paths[index] ? 0 : EXIT_FAILURE;
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Every entry of dir (but hidden ones) is NAME.npy or NAME.pb of one output. */
static int match_folder(const char *dir, const tci_context *ctx, size_t n, cli_reference *r) {
    struct dirent **entries = NULL;
    int count = scandir(dir, &entries, NULL, alphasort);
    if (count < 0) {
        fprintf(stderr, "tcinfer: cannot read the reference folder '%s': %s\n", dir,
                strerror(errno));
        return EXIT_FAILURE;
    }
    int rc = 0;
    size_t len = strlen(dir);
    char list[2048];
    for (int k = 0; k < count; k++) {
        const char *entry = entries[k]->d_name;
        if (rc || entry[0] == '.') continue;
        size_t stem = has_suffix(entry, ".npy") ? strlen(entry) - 4
                      : has_suffix(entry, ".pb") ? strlen(entry) - 3
                                                 : 0;
        char name[256], path[4096];
        snprintf(name, sizeof name, "%.*s", (int)stem, entry);
        size_t index = n;
        for (size_t i = 0; stem && i < n && index == n; i++) {
            char file[256];
            cli_output_file_name(ctx, i, file, sizeof file);
            if (strcmp(file, name) == 0) index = i;
        }
        if (index == n) {
            fprintf(stderr,
                    "tcinfer: the reference folder '%s' holds '%s', which is no output's file: "
                    "it should hold one NAME.npy or NAME.pb per output (%s)\n",
                    dir, entry, output_list(ctx, n, ".npy", list, sizeof list));
            rc = EXIT_USAGE;
            continue;
        }
        snprintf(path, sizeof path, "%s%s%s", dir, len && dir[len - 1] == '/' ? "" : "/", entry);
        rc = set_path(r, index, path, name);
    }
    for (int k = 0; k < count; k++) free(entries[k]);
    free(entries);
    return rc;
}

/* Which file holds the reference of each output, checked against the outputs' names. */
static int match_files(const cli_args *a, const tci_context *ctx, size_t n, cli_reference *r) {
    char list[2048];
    if (a->num_references == 1 && !a->references[0].name && cli_is_folder(a->references[0].path))
        return match_folder(a->references[0].path, ctx, n, r);
    for (int k = 0; k < a->num_references; k++) {
        const cli_input *ref = &a->references[k];
        if (!ref->name && cli_is_folder(ref->path)) {
            fprintf(stderr, "tcinfer: --reference DIR (a folder, '%s') goes alone\n", ref->path);
            return EXIT_USAGE;
        }
        if (!ref->name && n != 1) {
            fprintf(stderr,
                    "tcinfer: the model has %zu outputs (%s): name the output of each "
                    "--reference NAME=FILE, or give a folder\n",
                    n, output_list(ctx, n, "", list, sizeof list));
            return EXIT_USAGE;
        }
        size_t index = ref->name ? find_output(ctx, n, ref->name) : 0;
        if (index == n) {
            fprintf(stderr, "tcinfer: --reference %s=...: the model has no output '%s' (%s)\n",
                    ref->name, ref->name, output_list(ctx, n, "", list, sizeof list));
            return EXIT_USAGE;
        }
        char name[256];
        cli_output_file_name(ctx, index, name, sizeof name);
        int rc = set_path(r, index, ref->path, name);
        if (rc) return rc;
    }
    return 0;
}

/* The folder of path: itself when it is one, else the one holding it (resolved; "" if none). */
static void folder_of(const char *path, char *buf, size_t size) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    if (!cli_is_folder(copy)) {
        char *slash = strrchr(copy, '/');
        if (slash) slash[slash == copy ? 1 : 0] = '\0';
        else snprintf(copy, sizeof copy, ".");
    }
    char resolved[PATH_MAX];
    snprintf(buf, size, "%s", realpath(copy, resolved) ? resolved : "");
}

int cli_check_reference_paths(const cli_args *a) {
    const char *dir = a->output_dir;
    if (a->output_file && cli_is_folder(a->output_file)) dir = a->output_file;
    char out[4096], ref[4096];
    for (int k = 0; k < a->num_references; k++) {
        folder_of(a->references[k].path, ref, sizeof ref);
        if (dir) folder_of(dir, out, sizeof out);
        bool clash = dir && ref[0] && strcmp(out, ref) == 0;
        char out_file[PATH_MAX], ref_file[PATH_MAX];
        if (!clash && a->output_file && !cli_is_folder(a->output_file))
            clash = realpath(a->output_file, out_file) &&
                    realpath(a->references[k].path, ref_file) && strcmp(out_file, ref_file) == 0;
        if (clash) {
            fprintf(stderr,
                    "tcinfer: the outputs would be written over the reference '%s' before the "
                    "comparison: write them elsewhere (--output-dir, -o)\n",
                    a->references[k].path);
            return EXIT_USAGE;
        }
    }
    return 0;
}

int cli_load_references(const cli_args *a, const tci_context *ctx, size_t num_outputs,
                        cli_reference *r) {
    memset(r, 0, sizeof *r);
    r->tensors = calloc(num_outputs + 1, sizeof *r->tensors);
    r->paths = calloc(num_outputs + 1, sizeof *r->paths);
    r->count = num_outputs;
    if (!r->tensors || !r->paths) return EXIT_FAILURE;
    int rc = match_files(a, ctx, num_outputs, r);
    bool folder = a->num_references == 1 && !a->references[0].name &&
                  cli_is_folder(a->references[0].path);
    for (size_t i = 0; rc == 0 && i < num_outputs; i++) {
        if (r->paths[i]) continue;
        char name[256];
        cli_output_file_name(ctx, i, name, sizeof name);
        if (folder)
            fprintf(stderr,
                    "tcinfer: no reference for output '%s': the folder '%s' holds neither "
                    "%s.npy nor %s.pb (every output is compared)\n",
                    name, a->references[0].path, name, name);
        else
            fprintf(stderr,
                    "tcinfer: no reference for output '%s': add --reference %s=FILE (every "
                    "output is compared)\n",
                    name, name);
        rc = EXIT_USAGE;
    }
    for (size_t i = 0; rc == 0 && i < num_outputs; i++) {
        tci_status st = tci_tensor_read_file(r->paths[i], &r->tensors[i]);
        if (st != TCI_OK) rc = cli_fail(st);
    }
    return rc;
}

void cli_free_references(cli_reference *r) {
    for (size_t i = 0; i < r->count; i++) {
        if (r->tensors) tci_tensor_release(&r->tensors[i]);
        if (r->paths) free(r->paths[i]);
    }
    free(r->tensors);
    free(r->paths);
    memset(r, 0, sizeof *r);
}

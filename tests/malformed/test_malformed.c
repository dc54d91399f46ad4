/* Runs the malformed corpus (make_corpus.py): every case must give exactly its status and a
 * message containing its text, and never crash, hang or leak (ctest runs this under ASan+UBSan
 * in `make asan` and under valgrind where it is installed).
 *   usage: test_malformed CORPUS_DIR TCINFER_CLI */
#define _XOPEN_SOURCE 700 /* posix_spawn file actions, strdup */

#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tcinfer.h"

extern char **environ;

static const char *status_name(tci_status st) {
    static const char *names[] = {
#define STATUS_NAME(name, text) #name,
        TCI_STATUS_LIST(STATUS_NAME)
#undef STATUS_NAME
    };
    return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "?";
}

/* "limit=value" for a tci_engine_options limit; 0 on an unknown name. */
static int apply_option(tci_engine_options *o, const char *opt) {
    if (!opt[0]) return 1;
    const char *eq = strchr(opt, '=');
    if (!eq) return 0;
    unsigned long long v = strtoull(eq + 1, NULL, 10);
    size_t n = (size_t)(eq - opt);
    if (!strncmp(opt, "max_model_bytes", n)) o->max_model_bytes = v;
    else if (!strncmp(opt, "max_tensor_elements", n)) o->max_tensor_elements = (int64_t)v;
    else if (!strncmp(opt, "max_constant_bytes", n)) o->max_constant_bytes = v;
    else if (!strncmp(opt, "max_nodes", n)) o->max_nodes = v;
    else if (!strncmp(opt, "max_nesting_depth", n)) o->max_nesting_depth = (int)v;
    else if (!strncmp(opt, "max_parse_bytes", n)) o->max_parse_bytes = v;
    else return 0;
    return 1;
}

static unsigned char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0;
    *size = 0;
    for (;;) {
        if (*size == cap) {
            unsigned char *nb = realloc(buf, cap = cap ? cap * 2 : 4096);
            if (!nb) break;
            buf = nb;
        }
        size_t n = fread(buf + *size, 1, cap - *size, f);
        if (!n) break;
        *size += n;
    }
    fclose(f);
    return buf;
}

/* Runs the CLI with args ('|'-separated, {dir} replaced); *out_code its exit status (-1 on a
 * signal) and out_err its stderr. */
static void run_cli(const char *cli, const char *dir, const char *args, int *out_code,
                    char *out_err, size_t err_size) {
    char *argv[32] = {(char *)cli};
    int argc = 1;
    char *copy = strdup(args);
    char *expanded[32] = {0};
    for (char *tok = copy, *next; tok && *tok && argc < 31; tok = next) {
        next = strchr(tok, '|');
        if (next) *next++ = '\0';
        const char *at = strstr(tok, "{dir}");
        size_t len = strlen(tok) + strlen(dir) + 1;
        char *s = malloc(len);
        if (at) snprintf(s, len, "%.*s%s%s", (int)(at - tok), tok, dir, at + 5);
        else snprintf(s, len, "%s", tok);
        expanded[argc] = argv[argc] = s;
        argc++;
    }
    argv[argc] = NULL;
    char err_path[] = "/tmp/tci_malformed_XXXXXX";
    int fd = mkstemp(err_path);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    *out_code = -2;
    if (posix_spawn(&pid, cli, &fa, NULL, argv, environ) == 0) {
        int ws;
        if (waitpid(pid, &ws, 0) == pid) *out_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    ssize_t n = pread(fd, out_err, err_size - 1, 0);
    out_err[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(err_path);
    for (int i = 1; i < argc; i++) free(expanded[i]);
    free(copy);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_malformed CORPUS_DIR TCINFER_CLI\n");
        return 2;
    }
    const char *dir = argv[1], *cli = argv[2];
    char path[4096];
    snprintf(path, sizeof path, "%s/cases.tsv", dir);
    FILE *list = fopen(path, "r");
    if (!list) {
        fprintf(stderr, "test_malformed: no %s (run make_corpus.py)\n", path);
        return 2;
    }
    char line[8192];
    int cases = 0, failed = 0;
    while (fgets(line, sizeof line, list)) {
        line[strcspn(line, "\n")] = '\0';
        char *f[6] = {0};
        int nf = 0;
        for (char *p = line; nf < 6; nf++) {
            f[nf] = p;
            char *tab = strchr(p, '\t');
            if (!tab) {
                nf++;
                break;
            }
            *tab = '\0';
            p = tab + 1;
        }
        if (nf < 5) continue;
        const char *name = f[0], *kind = f[1], *target = f[2], *want = f[3], *msg = f[4];
        const char *opt = nf > 5 ? f[5] : "";
        char got[64], text[4096] = "";
        snprintf(path, sizeof path, "%s/%s", dir, target);
        cases++;
        if (!strcmp(kind, "cli")) {
            int code;
            run_cli(cli, dir, target, &code, text, sizeof text);
            snprintf(got, sizeof got, "%d", code);
        } else {
            tci_status st = TCI_ERR_INTERNAL;
            if (!strcmp(kind, "input")) {
                tci_tensor t;
                st = tci_tensor_read_file(path, &t);
                if (st == TCI_OK) tci_tensor_release(&t);
            } else {
                tci_engine_options o;
                tci_engine_options_init(&o);
                o.backend = TCI_BACKEND_CPU;
                tci_engine *e = NULL;
                if (!strcmp(kind, "memory")) {
                    size_t size = 0;
                    unsigned char *bytes = read_all(path, &size);
                    st = tci_engine_create_from_memory(bytes, size, opt[0] ? opt : NULL, &o, &e);
                    free(bytes);
                } else if (!apply_option(&o, opt)) {
                    fprintf(stderr, "test_malformed: %s: unknown option '%s'\n", name, opt);
                    return 2;
                } else {
                    st = tci_engine_create_from_file(path, &o, &e);
                }
                tci_engine_destroy(e);
            }
            snprintf(got, sizeof got, "%s", status_name(st));
            if (st != TCI_OK) snprintf(text, sizeof text, "%s", tci_last_error());
        }
        bool ok = !strcmp(got, want) && strstr(text, msg) != NULL;
        for (char *c = text; *c; c++)
            if (*c == '\n') *c = ' ';
        if (!ok) failed++;
        printf("%-4s %-30s %-24s %s%s%s\n", ok ? "ok" : "FAIL", name, got, text,
               ok ? "" : "\n     expected: ", ok ? "" : want);
        if (!ok) printf("     with text: %s\n", msg);
    }
    fclose(list);
    printf("%d cases, %d failed\n", cases, failed);
    return failed || cases < 60 ? 1 : 0;
}

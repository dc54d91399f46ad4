/* The tcinfer command's shared pieces: its arguments, failure reports in the command's terms,
 * and the reports (text or JSON). Everything goes through the public API in tcinfer.h. */
#ifndef TCI_CLI_CLI_H
#define TCI_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/json.h"

#include "tcinfer.h"

/* MAX_FP32_LAYERS: what --precision auto may keep in fp32 in a network of a few hundred layers
 * (inception_v3: 106), given back as --fp32-layers */
enum { EXIT_USAGE = 2, EXIT_UNSUPPORTED = 3, MAX_ITEMS = 64, MAX_FP32_LAYERS = 4096 };
_Static_assert(MAX_FP32_LAYERS == 4096, "the --fp32-layers usage error says 4096");

typedef struct cli_input {
    const char *name; /* NULL: the first input */
    const char *path;
} cli_input;

typedef struct cli_report cli_report; /* report_html.c */

/* The progress line (progress.c). */
typedef struct cli_progress {
    bool enabled, tty, drawn;
    char stage[64];
    int quarter;            /* not a TTY: the last quarter of the stage printed */
    double start, last_draw; /* seconds */
} cli_progress;

typedef struct cli_args {
    const char *model;
    cli_input inputs[MAX_ITEMS + 1];
    int num_inputs;
    tci_shape_override shapes[MAX_ITEMS];
    char *shape_names[MAX_ITEMS];
    int num_shapes;
    const char *output_file;
    const char *output_dir;
    bool quiet, info, list_ops, random, compare, compare_layers, no_graph, plan, json, verbose;
    bool compare_unfused; /* --compare-layers=unfused: every node's output, fusion off */
    uint64_t seed;
    int backend; /* -1: GPU where one exists, else CPU */
    int device;        /* --device: the CUDA device of the GPU engines (0 by default) */
    bool device_given; /* --device was given (it implies --backend gpu) */
    double tolerance; /* < 0: none */
    double atol, rtol; /* < 0: not given */
    cli_input references[MAX_ITEMS]; /* --reference: name NULL for FILE or DIR */
    int num_references;
    bool baseline_given;     /* --baseline, either value */
    cli_progress *progress;  /* set by main, not by the options */
    int bench, warmup, threads;
    const char *profile;
    tci_precision precision;
    tci_precision kept_precision; /* --keep-precision (FP32 when not given) */
    bool kept_given;              /* --keep-precision given */
    double accuracy_target;  /* --accuracy-target; 0: not given */
    tci_kernels kernels;
    const char *timing_cache;
    const char *save_engine, *load_engine;
    bool baseline_gpu;       /* --baseline gpu-fp32 */
    char *fp32_text;         /* --fp32-layers value, split in place into fp32_layers */
    const char *fp32_layers[MAX_FP32_LAYERS + 1];
    tci_engine_options limits; /* --limit: only its limit fields are used */
    const char *report;        /* --report FILE */
    cli_report *collect;       /* what the run gathers for --report (NULL: no report) */
} cli_args;

/* options.c */
/* Parses argv into a (0, or an exit status: usage errors are reported; --help, --version and
 * --devices print and return -1, meaning exit 0). */
int cli_parse_args(int argc, char **argv, cli_args *a);
/* Frees what cli_parse_args allocated (the shape names), whatever it returned. */
void cli_free_args(cli_args *a);
/* Prints "tcinfer: MESSAGE" for a usage error (fmt takes one string) and returns EXIT_USAGE. */
int cli_usage_error(const char *fmt, const char *arg);
/* Reports a failed call: tci_last_error() with the API's option names put as the command's
 * flags; returns the exit status (3 for TCI_ERR_UNSUPPORTED, else 1). */
int cli_fail(tci_status st);
/* text with the API's option names put as the command's flags, into buf. */
const char *cli_flag_terms(const char *text, char *buf, size_t size);
/* The engine log callback: warnings and above (everything with --verbose) to stderr; errors
 * are left to cli_fail. */
void cli_log(tci_log_level level, const char *message, void *user);

/* The message for --compare where no GPU can run (or --backend cpu): what works instead. */
int cli_compare_needs_gpu(void);

/* progress.c: a tci_progress_fn (user: the cli_progress); enabled false (--quiet): silent */
void cli_progress_init(cli_progress *p, bool enabled);
void cli_progress_update(const char *stage, size_t done, size_t total, void *user);
/* Seconds on a monotonic clock. */
double cli_now_s(void);
/* Clears an in-place line left by a stage that did not finish. */
void cli_progress_end(cli_progress *p);

/* reference.c */
typedef struct cli_reference {
    tci_tensor *tensors; /* per engine output */
    char **paths;        /* the file each came from */
    size_t count;
} cli_reference;
/* Reads the --reference files, one per output of ctx's engine (0, or an exit status: a name
 * that is no output, a missing or extra file, an unreadable one; reported). r is freed by
 * cli_free_references whatever this returned. */
int cli_load_references(const cli_args *a, const tci_context *ctx, size_t num_outputs,
                        cli_reference *r);
void cli_free_references(cli_reference *r);
/* 0, or EXIT_USAGE (reported) when --output-dir or -o would overwrite a --reference file. */
int cli_check_reference_paths(const cli_args *a);
/* Output index's file name in --output-dir, without .npy. */
void cli_output_file_name(const tci_context *ctx, size_t index, char *buf, size_t size);
bool cli_is_folder(const char *path);

/* report.c: the text reports go to stdout unless --json, whose document is `json` */
/* kept: what the engine's fp32 layers are kept in (cli_kept_name), or NULL */
void cli_print_info(const tci_engine *engine, const char *choices_from, const char *kept,
                    json_value *json);
/* "fp32", "tf32" or "bf16": what a GPU engine's fp32 layers are kept in, NULL when it has none
 * (or runs on the CPU). Built here, --keep-precision's (fp32 outside fp16 engines); an engine
 * file's is read from its steps, where tf32 layers (fp32 storage) read as "fp32". */
const char *cli_kept_name(const cli_args *a, const tci_engine *engine);
/* Output t's report (print false: --quiet); with outputs (--json) as an element of it. */
void cli_report_output(const tci_tensor *t, bool print, json_value *outputs);
int cli_check_nonfinite(const cli_args *a, const tci_engine *engine, tci_context *ctx,
                        const tci_tensor *inputs, size_t num_inputs, json_value *json);
/* --compare: against the --baseline run, or the --reference files (one per output of engine) */
int cli_run_compare(const cli_args *a, const tci_engine *engine, const tci_context *ctx,
                    const tci_tensor *inputs, size_t num_inputs, json_value *json);
int cli_run_bench(const cli_args *a, tci_context *ctx, const tci_tensor *inputs, json_value *json);
int cli_run_profile(const cli_args *a, tci_context *ctx, json_value *json);
/* "1x3x224x224" ("scalar" for rank 0, symbolic dims by name) */
const char *cli_format_info_dims(const tci_tensor_info *info, char *buf, size_t size);
json_value *cli_json_shape(int rank, const int64_t *dims);
const char *cli_precision_name(tci_precision p);

/* report_html.c: --report. The cli_report_* calls record what --compare, --compare-layers and
 * --profile computed; each is a no-op on a NULL report. */
cli_report *cli_report_create(const cli_args *a); /* NULL: failed, and said why */
void cli_report_destroy(cli_report *r);
/* Every float tensor --compare measured (layers: with --compare-layers), in its order;
 * step_nodes: the nodes of the fused GPU step that computed it, joined by '+' (NULL: one). */
void cli_report_compared(cli_report *r, bool layers, const tci_tensor *test,
                         const tci_tensor *ref, const tci_compare_result *result,
                         const char *step_nodes);
/* --compare-layers' verdict: indices into the compared tensors, -1 where none. */
void cli_report_layer_jump(cli_report *r, double threshold, int jump, int over);
void cli_report_profile_step(cli_report *r, size_t index, const char *node, const char *fused,
                             const char *kernel, float median_ms);
/* Writes a->report after the run of ctx; 0 or an exit status. */
int cli_write_report(const cli_args *a, cli_report *r, const tci_engine *engine,
                     const tci_context *ctx, json_value *json);

#endif

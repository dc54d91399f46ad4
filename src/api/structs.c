/* The versioned public structs (struct_size and the *_init functions) and the engine's log. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/internal.h"

tci_status api_check_size(size_t given, size_t minimum, const char *type) {
    if (given >= minimum) return TCI_OK;
    return status_error(TCI_ERR_INVALID_ARGUMENT,
                        "%s.struct_size is %zu, at least %zu expected: initialise the struct with "
                        "%s_init",
                        type, given, minimum, type);
}

void api_copy_out(void *out, const void *full, size_t full_size) {
    size_t given;
    memcpy(&given, out, sizeof given);
    size_t n = given < full_size ? given : full_size;
    memcpy(out, full, n);
    memcpy(out, &given, sizeof given);
}

void tci_engine_options_init(tci_engine_options *options) {
    if (!options) return;
    memset(options, 0, sizeof *options);
    options->struct_size = sizeof *options;
    options->backend = TCI_BACKEND_CPU;
    options->log_level = TCI_LOG_WARNING;
    options->kept_precision = TCI_PRECISION_FP32;
}

tci_status api_read_options(const tci_engine_options *given, tci_engine_options *out) {
    tci_engine_options_init(out);
    if (!given) return TCI_OK;
    TRY_STATUS(api_check_size(given->struct_size, API_MIN_ENGINE_OPTIONS, "tci_engine_options"));
    memcpy(out, given, given->struct_size < sizeof *out ? given->struct_size : sizeof *out);
    out->struct_size = sizeof *out;
    if (out->log_level < TCI_LOG_ERROR || out->log_level > TCI_LOG_DEBUG)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.log_level is %d; TCI_LOG_ERROR (0) to "
                            "TCI_LOG_DEBUG (3) expected",
                            (int)out->log_level);
    if (out->cpu_threads < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.cpu_threads is %d; 0 (the default) or a count "
                            "expected",
                            out->cpu_threads);
    if (out->max_tensor_elements < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.max_tensor_elements is negative");
    if (out->max_nesting_depth < 0 || out->max_nesting_depth > 1000)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.max_nesting_depth %d is outside 0..1000 "
                            "(protobuf-c recurses once per level)",
                            out->max_nesting_depth);
    if (out->device < 0)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.device is %d; a CUDA device index (0 or more) "
                            "expected",
                            out->device);
    if (out->kept_precision != TCI_PRECISION_FP32 && out->kept_precision != TCI_PRECISION_TF32 &&
        out->kept_precision != TCI_PRECISION_BF16)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.kept_precision is %d; TCI_PRECISION_FP32 (the "
                            "default), TCI_PRECISION_TF32 or TCI_PRECISION_BF16 expected",
                            (int)out->kept_precision);
    if (out->kept_precision != TCI_PRECISION_FP32 && out->precision != TCI_PRECISION_FP16 &&
        out->precision != TCI_PRECISION_AUTO)
        return status_error(TCI_ERR_INVALID_ARGUMENT,
                            "tci_engine_options.kept_precision %s is for the layers fp16 and "
                            "TCI_PRECISION_AUTO engines keep out of fp16; the precision is %d",
                            out->kept_precision == TCI_PRECISION_TF32 ? "TCI_PRECISION_TF32"
                                                                      : "TCI_PRECISION_BF16",
                            (int)out->precision);
    return TCI_OK;
}

#define API_INIT(type, name)                                                                    \
    void type##_init(type *name) {                                                                \
        if (!name) return;                                                                        \
        memset(name, 0, sizeof *name);                                                            \
        name->struct_size = sizeof *name;                                                         \
    }
API_INIT(tci_tensor_info, info)
API_INIT(tci_engine_stats, stats)
API_INIT(tci_device_format, format)
API_INIT(tci_gpu_report, report)
API_INIT(tci_compare_result, result)
#undef API_INIT

void tci_nonfinite_report_init(tci_nonfinite_report *report) {
    if (!report) return;
    memset(report, 0, sizeof *report);
    report->struct_size = sizeof *report;
    report->input_index = -1;
}

void api_log_message(const api_log *log, tci_log_level level, const char *fmt, ...) {
    if (!log || !log->fn || level > log->level) return;
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    log->fn(level, text, log->user);
}

tci_status api_log_failure(const api_log *log, tci_status st) {
    if (st != TCI_OK) api_log_message(log, TCI_LOG_ERROR, "%s", tci_last_error());
    return st;
}

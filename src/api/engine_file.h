/* The engine file (--save-engine / --load-engine): a versioned, checksummed container of what a
 * GPU engine needs to start without re-tuning. Pure C: the bytes only; engine.c fills it from
 * an engine and builds an engine from it.
 *
 * Layout, little-endian: the 8-byte magic "TCIENGIN", u32 format version, u32 zero, u64 payload
 * size, u64 FNV-1a-64 of the payload, then the payload: records of u32 tag, u64 size, bytes.
 * Format 2 adds one optional record, what TCI_PRECISION_AUTO chose (u32 count of the last
 * fp32 layers it added, u32 zero, f64 error reached, f64 accuracy target); a file without it is
 * written as format 1, which format 1 readers still load. Format 3 adds one more optional
 * record, the precision of the fp32 layers (u32 tci_precision, TF32 or BF16; u32 zero), written
 * only when it is not FP32: a file without it is written as format 2 or 1 as before, and a file
 * of format 1 or 2 keeps its layers in fp32. */
#ifndef TCI_API_ENGINE_FILE_H
#define TCI_API_ENGINE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "tcinfer.h"

#define ENGINE_FILE_VERSION 3     /* the newest format, read and written */
#define ENGINE_FILE_MIN_VERSION 1 /* the oldest read: format 1 lacks the auto record */

typedef struct engine_file {
    char *machine;        /* GPU model, compute capability, CUDA / cuDNN / cuBLASLt versions and
                             kernel tables of the build that tuned it */
    char *producer;       /* "tcinfer VERSION" */
    int32_t precision;    /* tci_precision */
    int32_t kernels;      /* tci_kernels */
    int32_t kept_precision; /* tci_precision of the fp32 layers (format 3): FP32 (also what
                               files without the record read as), TF32 or BF16 */
    char **fp32_layers;   /* NULL-terminated, or NULL */
    void *model;          /* the optimised graph as an ONNX ModelProto */
    size_t model_size;
    char **fp16_tensors;  /* NULL-terminated, or NULL: FLOAT constants of model stored as FLOAT16 */
    char *choices;        /* kernel choice per tuned problem, timing-cache lines */
    /* TCI_PRECISION_AUTO (format 2; has_auto 0: not built by it): of fp32_layers, the last
     * num_auto_fp32 are the layers it chose; the outputs' relative L2 error it reached (>= 0,
     * or NaN) and the accuracy target it searched for (0: overflow only) */
    int has_auto;
    uint32_t num_auto_fp32;
    double auto_error, auto_target;
} engine_file;

/* Writes through a temporary file renamed into place: format 3 when kept_precision is TF32 or
 * BF16, else format 2 when has_auto, else format 1. */
tci_status engine_file_write(const char *path, const engine_file *file);

/* Reads and checks magic, version, size and checksum: a damaged, truncated or foreign file is
 * TCI_ERR_PARSE naming path and what is wrong; a format version outside ENGINE_FILE_MIN_VERSION ..
 * ENGINE_FILE_VERSION is TCI_ERR_UNSUPPORTED.
 * The fields are malloc'd (engine_file_free). */
tci_status engine_file_read(const char *path, engine_file *out);
/* The same checks on a file's bytes in memory; path only names it in messages. */
tci_status engine_file_parse(const unsigned char *bytes, size_t size, const char *path,
                             engine_file *out);
void engine_file_free(engine_file *file);

#endif

/* TCI_PRECISION_AUTO: the search for the layers an fp16 engine must keep in fp32, and the one
 * decision each round of it makes (apart, so that it is tested without a GPU). */
#ifndef TCI_API_PRECISION_AUTO_H
#define TCI_API_PRECISION_AUTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/ir.h"

#include "tcinfer.h"

/* What one round found: the fp16 engine's run against the fp32 engine's. */
typedef struct auto_round {
    int round;                          /* 1 .. TCI_PRECISION_AUTO_MAX_ROUNDS */
    uint64_t mismatches;                /* NaN/Inf in the fp16 outputs where the fp32 ones are
                                           finite; 0: the round is clean */
    const tci_nonfinite_report *report; /* the fp16 run's, when mismatches > 0 */
    bool layer_in_fp32;                 /* the layer report names is kept already */
    size_t upstream;                    /* then: the layers producing what it reads (through
                                           data movement) not kept yet */
    const char *kept;                   /* "fp32", "tf32" or "bf16": what kept layers run in,
                                           for messages (NULL: fp32) */
} auto_round;

/* "fp32", "tf32" or "bf16": the precision options keep layers in (kept_precision). */
const char *api_auto_kept_name(const tci_engine_options *options);

/* The layer to keep in fp32 next (*out_layer: report->layer), or NULL when the round is clean.
 * A layer in fp32 already that still produces NaN/Inf from what it reads gets what it reads
 * from fp16 layers that lost it (an underflowed norm, an epsilon below fp16's smallest
 * subnormal): *out_layer is that layer, and the caller keeps its upstream layers in fp32.
 * TCI_ERR_UNSUPPORTED, saying why, where no layer can be moved: an input holds NaN/Inf, no
 * layer produced them in the re-run, the layer and its upstream ones are in fp32 already, or
 * this was the last round. */
tci_status api_auto_next_layer(const auto_round *r, const char **out_layer);

/* tci_engine_options.accuracy_target: of count layers, each with the relative L2 error of its
 * output (errors; NaN: not measured) and the largest of the layers it reads (input_errors), those
 * not yet in fp32 into order: first those that add error (errors - input_errors > 0), the most
 * first (ties: in node order), then the other measured ones in node order. Returns how many (0
 * also when out of memory). */
size_t api_auto_rank(size_t count, const double *errors, const double *input_errors,
                     const bool *in_fp32, int *order);

/* An overflow round: of count layers, with the NaN/Inf of each output where the fp32 engine's
 * is finite (nonfinite) and the most of the layers each reads (input_nonfinite), and the largest
 * magnitude of each output in the fp32 run (range) and of what each reads (input_range),
 * pick[i]: layer i is not in fp32 yet and produces them from finite inputs (parallel branches
 * overflow at once), or its output or input is past fp16's largest finite value (65504: its
 * fp16 storage, or the cast of its input, would overflow next). */
void api_auto_overflow_layers(size_t count, const uint64_t *nonfinite,
                              const uint64_t *input_nonfinite, const double *range,
                              const double *input_range, const bool *in_fp32, bool *pick);

/* tci_engine_create_*'s build when options (complete: api_read_options) ask for
 * TCI_PRECISION_AUTO; owns g (the loaded graph), also on failure. */
tci_status api_auto_create(ir_graph *g, const tci_engine_options *options,
                           tci_engine **out_engine);

#endif

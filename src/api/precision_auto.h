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
    bool layer_in_fp32;                 /* the layer report names is in fp32 already */
} auto_round;

/* The layer to keep in fp32 next (*out_layer: report->layer), or NULL when the round is clean.
 * TCI_ERR_UNSUPPORTED, saying why, where no layer can be moved: an input holds NaN/Inf, no
 * layer produced them in the re-run, the layer is in fp32 already, or this was the last round. */
tci_status api_auto_next_layer(const auto_round *r, const char **out_layer);

/* tci_engine_options.accuracy_target: of count layers, each with the relative L2 error of its
 * output (errors) and the largest of the layers it reads (input_errors), the one not yet in
 * fp32 that adds the most error (errors - input_errors), or -1 where none adds any. */
int api_auto_worst_layer(size_t count, const double *errors, const double *input_errors,
                         const bool *in_fp32);

/* tci_engine_create_*'s build when options (complete: api_read_options) ask for
 * TCI_PRECISION_AUTO; owns g (the loaded graph), also on failure. */
tci_status api_auto_create(ir_graph *g, const tci_engine_options *options,
                           tci_engine **out_engine);

#endif

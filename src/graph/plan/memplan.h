/* Activation memory planner: gives every intermediate buffer an offset in one arena so that
 * buffers alive at the same time never share bytes, keeping the arena (peak) small. */
#ifndef TCI_GRAPH_MEMPLAN_H
#define TCI_GRAPH_MEMPLAN_H

#include <stddef.h>

#include "tcinfer.h"

/* One buffer to place. A buffer is alive on every step of [first_step, last_step] (inclusive):
 * written at first_step, last read at last_step. */
typedef struct memplan_buffer {
    size_t bytes;
    int first_step;
    int last_step;
    /* Index of a buffer whose memory this one may take over in place (an element-wise op writing
     * over its input), or -1. Honoured only when legal: that buffer's last_step equals this
     * one's first_step, this one's aligned size fits in it, no other buffer has taken it over
     * already (the lowest index wins), and the link does not put a buffer living on one single
     * step in the middle of a chain (its parent and child would be alive together). An illegal
     * hint is ignored, not an error: whether reuse is possible depends on the schedule. */
    int inplace_of;
} memplan_buffer;

typedef struct memplan_totals {
    size_t arena_bytes; /* the planned arena: max over buffers of offset + aligned size */
    size_t naive_bytes; /* sum of aligned sizes: an arena with one slot per buffer */
} memplan_totals;

/* Plans offsets[i] for buffers[i] (offsets has count entries). alignment is a power of two;
 * every size is rounded up to it, so every offset is a multiple of it. Zero-byte buffers get
 * offset 0 and occupy nothing.
 *
 * Algorithm: "greedy by size" (as in TFLite's and onnxruntime's arena planners). In-place
 * chains are first merged into one slot (alive from the chain's first step to its last, as
 * large as its head, which is the largest since each link must fit in its parent). Slots are
 * then placed largest first (ties: earlier first_step, then lower index); each goes into the
 * smallest gap between the already placed slots whose lifetimes intersect its own that is
 * large enough (best fit), or above them all when no gap is. Two buffers whose lifetimes
 * intersect never overlap in memory, except a buffer and the in-place parent it took over,
 * which share an offset and meet only at the handover step.
 *
 * Errors (TCI_ERR_INVALID_ARGUMENT): count < 0, alignment not a power of two, a negative or
 * inverted lifetime, inplace_of out of range or naming the buffer itself, or sizes whose
 * arena or naive sum would overflow size_t. TCI_ERR_OUT_OF_MEMORY if scratch space fails. */
tci_status memplan_plan(const memplan_buffer *buffers, int count, size_t alignment,
                        size_t *offsets, memplan_totals *totals);

/* arena_bytes / naive_bytes: the fraction of the naive footprint the plan needs (1 when both
 * are 0, as nothing was saved). */
double memplan_ratio(const memplan_totals *totals);

#endif

/* Strided views of a dense tensor through movement ops, for the fusions that read or write a
 * tensor in place of the Transposes, Reshapes and selections that lead to it (attention.c).
 *
 * Element (i0, i1, ...) of a view is at offset + sum over dims d of the offset of i_d in d, and
 * a dim is a run of sub-dims, outermost first, each with its own stride: i_d is split into the
 * sub-dims' indices in row-major order. A Reshape that merges dims no single stride describes
 * (a packed QKV tensor seen as (seq, batch * heads, head_size): batch and heads strides apart)
 * makes a dim of several sub-dims; a later Reshape that splits it again at those sub-dims (back to
 * (batch, heads, ...)) gives plain dims. A consumer reading through strides needs plain dims
 * (view_plain). Sub-dims of size 1 are dropped and neighbours that are one run merged, so a view
 * has the fewest sub-dims that say it. */
#ifndef TCI_GRAPH_PASSES_VIEW_H
#define TCI_GRAPH_PASSES_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "tcinfer.h"

#define VIEW_MAX_SUB 4

typedef struct view {
    int rank;
    int64_t dims[TCI_MAX_RANK];
    /* dim d: sub-dims sub_dims[d][0 .. num_sub[d]), outermost first (at least one) */
    int num_sub[TCI_MAX_RANK];
    int64_t sub_dims[TCI_MAX_RANK][VIEW_MAX_SUB], sub_strides[TCI_MAX_RANK][VIEW_MAX_SUB];
    int64_t offset;
} view;

/* The view of a dense (row-major) tensor of these dims by itself. */
void view_dense(view *v, int rank, const int64_t *dims);

/* Whether every dim is one stride (then view_stride says it). */
bool view_plain(const view *v);

/* Dim d's stride; only meaningful for a dim of one sub-dim (any value for a dim of size 1). */
int64_t view_stride(const view *v, int d);

/* The same elements in row-major order seen with new dims (a Reshape); false where the sub-dims
 * cannot be cut into them or a dim would need more than VIEW_MAX_SUB sub-dims. */
bool view_reshape(view *v, int rank, const int64_t *dims);

/* Output dim d is input dim perm[d] (a Transpose); with inverse, input dim perm[d] is output dim
 * d (undoing it). perm has v->rank entries. */
void view_permute(view *v, const int *perm, bool inverse);

/* Each dim d from start[d] in steps of step[d] for len[d] elements (a constant Slice or Gather;
 * len 1 at drop, which then goes: -1 for none); false where a dim so cut is not one sub-dim or the
 * range leaves the dim. */
bool view_select(view *v, const int64_t *start, const int64_t *step, const int64_t *len,
                 int drop);

#endif

/* Row permutations moved through row-wise products, for the attention fusion (rows.c):
 * pass_fuse_attention moves them, fuses, and keeps the moves its steps fold. */
#ifndef TCI_GRAPH_PASSES_ROWS_H
#define TCI_GRAPH_PASSES_ROWS_H

#include <stddef.h>

#include "graph/ir.h"

typedef struct rows_move rows_move;

/* The moves made, to keep or put back (rows_keep_folded). */
typedef struct rows_moves {
    rows_move *moves;
    size_t num;
} rows_moves;

/* In a sorted graph, each Transpose that permutes only the leading dims (its last dim stays
 * last) and is read alone by a row-wise product (a MatMul by a matrix, a Gemm without transA:
 * OP_PATTERN_ROWS; an element-wise binary op whose other operand is the same for every row),
 * through such products as far as each result is read by the next alone, moves after them: they
 * compute their rows in the Transpose's input order, and the Transpose permutes the last result
 * into the tensor it was. A Transpose whose input such products compute moves before them
 * likewise: directly where they keep the Transpose's rank, and where the input is a 2-D
 * product's result with its rows split by a reshape (torchvision's out_proj Gemm, as many input
 * columns as output columns), that reshape splits the product's input instead, the Transpose
 * permutes it, a Reshape made here merges the rows again for the product, and another splits its
 * result into the Transpose's output. The graph computes the same values, sorted again; every tensor whose values or dims change is a new one named
 * "<tensor>/rows", so nothing keeps a model tensor's name with other values. *out lists the
 * moves (rows_keep_folded frees it). */
tci_status rows_move_transposes(ir_graph *graph, rows_moves *out);

/* After the attention fusion: keeps the moves whose Transpose (or a Reshape made for it) an
 * attention step with a kernel head dim (plan_attention_head_dim_ok) computes, where its strided
 * reads or writes make it no step; puts the other graph parts back as they were (the nodes made
 * for them removed, the graph sorted again). An attention without a kernel that folded a move
 * lowers as unfused steps, the moved Transpose a copy of a wider tensor perhaps: its fusion is
 * cleared and *refuse set, for the caller to match it again on the graph put back. Frees
 * moves. */
tci_status rows_keep_folded(ir_graph *graph, rows_moves *moves, bool *refuse);

#endif

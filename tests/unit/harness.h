/* Shared bits of the Check unit tests. */
#ifndef TCI_TEST_HARNESS_H
#define TCI_TEST_HARNESS_H

#include <stdint.h>
#include <check.h>
#include <string.h>

#include "tcinfer.h"

/* Runs one suite and returns the process exit code. */
int test_run_suite(Suite *suite);

/* Asserts that expr fails with status and that tci_last_error() contains text. */
#define ck_assert_tci_error(expr, status, text)                                                   \
    do {                                                                                          \
        tci_status ck_st_ = (expr);                                                               \
        ck_assert_msg(ck_st_ == (status), "expected status %s, got %s (%s)",                      \
                      tci_status_string(status), tci_status_string(ck_st_), tci_last_error());    \
        ck_assert_msg(strstr(tci_last_error(), (text)) != NULL,                                   \
                      "error message '%s' lacks '%s'", tci_last_error(), (text));              \
    } while (0)

#define ck_assert_tci_ok(expr)                                                                    \
    do {                                                                                          \
        tci_status ck_st_ = (expr);                                                               \
        ck_assert_msg(ck_st_ == TCI_OK, "%s failed: %s: %s", #expr, tci_status_string(ck_st_),    \
                      tci_last_error());                                                          \
    } while (0)


/* ---- one-node graphs for op tests ---- */
#include "graph/ir.h"

/* A node with num_inputs/num_outputs fresh tensors, op from the default domain at opset. */
ir_node *th_node(ir_graph *graph, const char *op_type, int opset, int num_inputs,
                 int num_outputs);
void th_attr_int(ir_graph *graph, ir_node *node, const char *name, int64_t value);
void th_attr_ints(ir_graph *graph, ir_node *node, const char *name, const int64_t *values,
                  size_t count);
void th_attr_float(ir_graph *graph, ir_node *node, const char *name, float value);
void th_attr_floats(ir_graph *graph, ir_node *node, const char *name, const float *values,
                    size_t count);
void th_attr_string(ir_graph *graph, ir_node *node, const char *name, const char *value);
void th_attr_strings(ir_graph *graph, ir_node *node, const char *name,
                     const char *const *values, size_t count);
/* A tensor attribute (Constant's value); value's data is copied. */
void th_attr_tensor(ir_graph *graph, ir_node *node, const char *name, const tci_tensor *value);

/* A view of caller memory; dims has `rank` entries. */
tci_tensor th_tensor(tci_dtype dtype, int rank, const int64_t *dims, const void *data);

/* Prepares (resolve + parse) and runs the node on the CPU reference path. inputs has
 * node->num_inputs entries; one with dtype TCI_DTYPE_UNDEFINED is an omitted optional input.
 * outputs (node->num_outputs entries) receive malloc'd data: release with th_free. */
tci_status th_run(ir_graph *graph, ir_node *node, const tci_tensor *inputs, tci_tensor *outputs);
void th_free(tci_tensor *outputs, int count);

/* Runs the whole graph on the CPU reference executor with inputs in[] (graph input order) and
 * returns a malloc'd copy of float output `index`. */
float *th_cpu_output(ir_graph *graph, const tci_tensor *in, size_t num_in, size_t index);

/* Asserts |got[i] - want[i]| <= tol for all i, reporting the first index that differs. */
void th_assert_near(const float *got, const float *want, size_t count, float tol);

/* ---- whole graphs for pass and plan tests ---- */

/* A named tensor; data (count * dtype size bytes) is copied into the graph arena when given,
 * making it a constant. */
/* A named activation of a graph under construction: dtype and dims left for inference. */
ir_tensor *th_act(ir_graph *graph, const char *name);
/* n deterministic values in about [-1, 1] from seed (a linear congruential sequence). */
void th_fill(float *v, int64_t n, unsigned seed);
ir_tensor *th_named(ir_graph *graph, const char *name, tci_dtype dtype, int rank,
                    const int64_t *dims, const void *data);
/* A node wired to existing tensors. */
ir_node *th_node_io(ir_graph *graph, const char *name, const char *op_type, int opset,
                    ir_tensor **inputs, int num_inputs, ir_tensor **outputs, int num_outputs);
/* Declares the graph's inputs and outputs. */
void th_graph_io(ir_graph *graph, ir_tensor **inputs, int num_inputs, ir_tensor **outputs,
                 int num_outputs);

/* Prepares the node and runs only its shape inference (static shapes: in[] may hold NULL for
 * omitted inputs, data NULL, dims -1); out has node->num_outputs entries (at most 4). */
tci_status th_infer(ir_graph *graph, ir_node *node, const tci_tensor *const *in, tci_tensor *out);
/* A tensor known by dtype and shape only; rank -1 is an unknown rank. */
tci_tensor th_shape_only(tci_dtype dtype, int rank, const int64_t *dims);
void th_assert_dims(const tci_tensor *t, int rank, const int64_t *dims);

/* ---- GPU plans replayed on the host ---- */
#include "graph/lower.h"

/* Replays an ATTENTION step on the host with the kernel's rules (src/kernels/attention.cu), in
 * double: q, k, v (and mask, or keep as bytes) are the tensors the step reads, y the one it
 * writes (y_strides; every element it covers is written). A key the causal flag or the keep mask
 * drops scores -inf, a kept-dropped one -1e30 with keep_row_mean (a row of those alone is then
 * uniform); a row of -inf alone is zeros. */
void th_replay_attention(const plan_attention *a, const float *q, const float *k, const float *v,
                         const float *mask, const uint8_t *keep, float *y);

/* The GPU plan of graph g as the API builds it (optimisation and the GPU passes asserted to
 * succeed, then plan_build, whose status is returned). */
tci_status th_plan_for_gpu(ir_graph *g, plan **out_plan);

/* Replays a COPY step's view on float data: dst[sum i*out_strides] = src[in_offset +
 * sum i*strides]. */
void th_replay_copy(const plan_step *s, const float *src, float *dst);

#endif

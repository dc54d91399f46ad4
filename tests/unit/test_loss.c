/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (loss.c): hand-computed losses, versions,
 * a mean over nothing, int32 targets, and the errors the conformance cases never reach. */
#include <math.h>

#include "harness.h"
#include "layers/op.h"

#define F TCI_DTYPE_FLOAT
#define I64 TCI_DTYPE_INT64

/* x (2, 3): log-probabilities for NLL, scores for SCE */
static const float ls_x[6] = {-1, -2, -3, -0.5f, -1.5f, -2.5f};
static const int64_t ls_xd[] = {2, 3}, ls_td[] = {2};

static ir_node *loss_node(ir_graph *g, const char *op, int opset, int inputs, int outputs,
                          const char *reduction, int64_t ignore, bool has_ignore) {
    ir_node *n = th_node(g, op, opset, inputs, outputs);
    if (reduction) th_attr_string(g, n, "reduction", reduction);
    if (has_ignore) th_attr_int(g, n, "ignore_index", ignore);
    return n;
}

START_TEST(test_nll_loss) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    const int64_t t[2] = {2, 0};
    const float w[3] = {0.5f, 1, 4};
    tci_tensor in[3] = {th_tensor(F, 2, ls_xd, ls_x), th_tensor(I64, 1, ls_td, t),
                        th_tensor(F, 1, (const int64_t[]){3}, w)},
               out[2];
    /* none: -x[i, t_i] * w[t_i] = {12, 0.25} */
    const int opsets[] = {12, 13, 21, 22}, since[] = {12, 13, 13, 22};
    for (int i = 0; i < 4; i++) {
        ir_node *n = loss_node(g, "NegativeLogLikelihoodLoss", opsets[i], 3, 1, "none", 0, false);
        ck_assert_tci_ok(th_run(g, n, in, out));
        ck_assert_int_eq(n->since_version, since[i]);
        th_assert_dims(&out[0], 1, ls_td);
        th_assert_near(out[0].data, (const float[]){12, 0.25f}, 2, 1e-6f);
        th_free(out, 1);
    }
    /* weighted mean divides by the weights taken: 12.25 / 4.5; sum 12.25 */
    ir_node *n = loss_node(g, "NegativeLogLikelihoodLoss", 22, 3, 1, NULL, 0, false);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(out[0].rank, 0);
    th_assert_near(out[0].data, (const float[]){12.25f / 4.5f}, 1, 1e-6f);
    th_free(out, 1);
    n = loss_node(g, "NegativeLogLikelihoodLoss", 22, 3, 1, "sum", 0, false);
    ck_assert_tci_ok(th_run(g, n, in, out));
    th_assert_near(out[0].data, (const float[]){12.25f}, 1, 1e-6f);
    th_free(out, 1);
    /* int32 targets; ignoring both makes a mean 0/0 */
    in[1] = th_tensor(TCI_DTYPE_INT32, 1, ls_td, (const int32_t[]){-7, -7});
    n = loss_node(g, "NegativeLogLikelihoodLoss", 22, 2, 1, "mean", -7, true);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert(isnan(((float *)out[0].data)[0]));
    th_free(out, 1);
    /* errors */
    in[1] = th_tensor(I64, 1, ls_td, (const int64_t[]){3, 0});
    n = loss_node(g, "NegativeLogLikelihoodLoss", 22, 2, 1, NULL, 0, false);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_ARGUMENT,
                        "target 3 at element 0 is not a class in [0, 3) nor ignore_index");
    n = loss_node(g, "NegativeLogLikelihoodLoss", 22, 2, 1, "average", 0, false);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "reduction 'average' is not one of none, sum, mean");
    in[1] = th_tensor(I64, 1, (const int64_t[]){3}, (const int64_t[]){0, 0, 0});
    n = loss_node(g, "NegativeLogLikelihoodLoss", 22, 2, 1, NULL, 0, false);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "target of shape 3 does not match input 2x3");
    in[1] = th_tensor(I64, 1, ls_td, t);
    in[2] = th_tensor(F, 1, (const int64_t[]){2}, w);
    n = loss_node(g, "NegativeLogLikelihoodLoss", 22, 3, 1, NULL, 0, false);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "weight has 2 entries for 3 classes");
    n = loss_node(g, "NegativeLogLikelihoodLoss", 11, 2, 1, NULL, 0, false);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_UNSUPPORTED, "from opset 12");
    ir_graph_destroy(g);
}
END_TEST

START_TEST(test_softmax_cross_entropy_loss) {
    ir_graph *g;
    ck_assert_tci_ok(ir_graph_create(&g));
    /* both rows are shifts of (0, -1, -2): log-softmax (0, -1, -2) - log(1 + e^-1 + e^-2) */
    const double lse = log(1.0 + exp(-1.0) + exp(-2.0));
    const float lp[6] = {(float)-lse,       (float)(-1 - lse), (float)(-2 - lse),
                         (float)-lse,       (float)(-1 - lse), (float)(-2 - lse)};
    const int64_t t[2] = {1, 2};
    tci_tensor in[2] = {th_tensor(F, 2, ls_xd, ls_x), th_tensor(I64, 1, ls_td, t)}, out[2];
    ir_node *n = loss_node(g, "SoftmaxCrossEntropyLoss", 13, 2, 2, "none", 0, false);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 13);
    th_assert_near(out[0].data, (const float[]){(float)(1 + lse), (float)(2 + lse)}, 2, 1e-6f);
    th_assert_dims(&out[1], 2, ls_xd);
    th_assert_near(out[1].data, lp, 6, 1e-6f);
    th_free(out, 2);
    /* opset 12, one output, ignore_index drops the second row from the mean */
    n = loss_node(g, "SoftmaxCrossEntropyLoss", 12, 2, 1, "mean", 2, true);
    ck_assert_tci_ok(th_run(g, n, in, out));
    ck_assert_int_eq(n->since_version, 12);
    th_assert_near(out[0].data, (const float[]){(float)(1 + lse)}, 1, 1e-6f);
    th_free(out, 1);
    /* a 1-D input has no class axis */
    in[0] = th_tensor(F, 1, (const int64_t[]){3}, ls_x);
    n = loss_node(g, "SoftmaxCrossEntropyLoss", 13, 2, 1, NULL, 0, false);
    ck_assert_tci_error(th_run(g, n, in, out), TCI_ERR_INVALID_MODEL,
                        "input must be (N, C, d1...), rank >= 2, got rank 1");
    n = loss_node(g, "SoftmaxCrossEntropyLoss", 13, 2, 3, NULL, 0, false);
    ck_assert_tci_error(op_prepare_node(n, g->arena), TCI_ERR_INVALID_MODEL,
                        "has 3 outputs, expected 1 to 2");
    ir_graph_destroy(g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("loss");
    TCase *t = tcase_create("loss");
    tcase_add_test(t, test_nll_loss);
    tcase_add_test(t, test_softmax_cross_entropy_loss);
    suite_add_tcase(s, t);
    return test_run_suite(s);
}

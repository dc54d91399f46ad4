/* The ONNX -> cuDNN RNN mapping (src/kernels/rnn_cudnn_pack.c), without a GPU: gate orders, what
 * cuDNN is refused for, and the weights placed at the slots cudnnGetRNNWeightParams would report
 * (here laid out by the test, in a different order and with transposed strides, so that only
 * the slots, never an assumed layout, decide where a value goes). */
#include <string.h>

#include "harness.h"
#include "kernels/rnn_cudnn_pack.h"

enum { H = 2, IN = 3 };

/* Distinct values: W[d][row][col] = 1000 d + 10 row + col / 10; R^T and biases likewise. */
static float w_value(int d, int row, int col) { return 1000.0f * d + 10.0f * row + 0.1f * col; }
static float r_value(int d, int row, int col) { return -1000.0f * d - 10.0f * row - 0.1f * col; }
static float wb_value(int d, int row) { return 500.0f + 100.0f * d + row; }
static float rb_value(int d, int row) { return -500.0f - 100.0f * d - row; }

typedef struct onnx_layer {
    float w[2 * 4 * H * IN], rt[2 * H * 4 * H], wb[2 * 4 * H], rb[2 * 4 * H];
    kern_rnn_onnx_weights view;
} onnx_layer;

static void make_layer(int gates, int dirs, onnx_layer *l) {
    const int GH = gates * H;
    for (int d = 0; d < dirs; d++)
        for (int row = 0; row < GH; row++) {
            for (int col = 0; col < IN; col++)
                l->w[(d * GH + row) * IN + col] = w_value(d, row, col);
            for (int col = 0; col < H; col++)
                l->rt[(d * H + col) * GH + row] = r_value(d, row, col);
            l->wb[d * GH + row] = wb_value(d, row);
            l->rb[d * GH + row] = rb_value(d, row);
        }
    l->view = (kern_rnn_onnx_weights){l->w, l->rt, l->wb, l->rb, NULL};
}

/* Slots in reverse order of (direction, linear layer), biases first, odd linear layers'
 * matrices stored column-major: nothing lines up with ONNX's order by accident. */
static int64_t make_slots(int gates, int dirs, kern_rnn_param_slot *m, kern_rnn_param_slot *b) {
    int64_t at = 0;
    for (int i = dirs * 2 * gates - 1; i >= 0; i--) {
        b[i] = (kern_rnn_param_slot){at, H, 1, 1, 1};
        at += H;
    }
    for (int i = dirs * 2 * gates - 1; i >= 0; i--) {
        int cols = i % (2 * gates) >= gates ? H : IN;
        bool col_major = i % 2;
        m[i] = (kern_rnn_param_slot){at, H, cols, col_major ? 1 : cols, col_major ? H : 1};
        at += (int64_t)H * cols;
    }
    return at + 5; /* a little unused space past the last slot: stays zero */
}

static kern_rnn_cudnn_desc desc_of(int cell, int dirs) {
    kern_rnn_cudnn_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = TCI_DTYPE_FLOAT16;
    d.cell = cell;
    d.seq_length = 5;
    d.batch = 2;
    d.input = IN;
    d.hidden = H;
    d.directions = dirs;
    d.linear_before_reset = true;
    return d;
}

START_TEST(test_gate_orders) {
    /* cuDNN LSTM i f g o; ONNX i o f c */
    ck_assert_int_eq(kern_rnn_cudnn_onnx_gate(KERN_RNN_LSTM, 0), 0);
    ck_assert_int_eq(kern_rnn_cudnn_onnx_gate(KERN_RNN_LSTM, 1), 2);
    ck_assert_int_eq(kern_rnn_cudnn_onnx_gate(KERN_RNN_LSTM, 2), 3);
    ck_assert_int_eq(kern_rnn_cudnn_onnx_gate(KERN_RNN_LSTM, 3), 1);
    /* cuDNN GRU r z h; ONNX z r h */
    ck_assert_int_eq(kern_rnn_cudnn_onnx_gate(KERN_RNN_GRU, 0), 1);
    ck_assert_int_eq(kern_rnn_cudnn_onnx_gate(KERN_RNN_GRU, 1), 0);
    ck_assert_int_eq(kern_rnn_cudnn_onnx_gate(KERN_RNN_GRU, 2), 2);
    ck_assert_int_eq(kern_rnn_cudnn_onnx_gate(KERN_RNN_TANH, 0), 0);
    ck_assert_int_eq(kern_rnn_cudnn_gates(KERN_RNN_LSTM), 4);
    ck_assert_int_eq(kern_rnn_cudnn_gates(KERN_RNN_GRU), 3);
    ck_assert_int_eq(kern_rnn_cudnn_gates(KERN_RNN_TANH), 1);
}
END_TEST

/* Every slot of every cell, bidirectional: element (i, j) of linear layer k of direction d is
 * ONNX's gate g = onnx_gate(k) row g*H + i, column j of W (k < gates) or R; the biases W's and
 * R's halves of B. */
START_TEST(test_pack_every_cell) {
    static const int cells[3] = {KERN_RNN_TANH, KERN_RNN_GRU, KERN_RNN_LSTM};
    for (int c = 0; c < 3; c++) {
        const int cell = cells[c], gates = kern_rnn_cudnn_gates(cell), dirs = 2;
        onnx_layer l;
        make_layer(gates, dirs, &l);
        kern_rnn_param_slot m[2 * 2 * 4], b[2 * 2 * 4];
        int64_t count = make_slots(gates, dirs, m, b);
        float space[512];
        ck_assert_int_le(count, 512);
        for (int64_t i = 0; i < count; i++) space[i] = 12345.0f;
        kern_rnn_cudnn_desc d = desc_of(cell, dirs);
        ck_assert_tci_ok(kern_rnn_cudnn_pack(&d, &l.view, m, b, space, count));
        for (int dir = 0; dir < dirs; dir++)
            for (int k = 0; k < 2 * gates; k++) {
                const kern_rnn_param_slot *s = &m[dir * 2 * gates + k];
                const int g = kern_rnn_cudnn_onnx_gate(cell, k % gates);
                for (int i = 0; i < H; i++) {
                    for (int j = 0; j < s->cols; j++) {
                        float want = k < gates ? w_value(dir, g * H + i, j)
                                               : r_value(dir, g * H + i, j);
                        ck_assert_float_eq(space[s->offset + i * s->row_stride + j * s->col_stride],
                                           want);
                    }
                    float bias = k < gates ? wb_value(dir, g * H + i) : rb_value(dir, g * H + i);
                    ck_assert_float_eq(space[b[dir * 2 * gates + k].offset + i], bias);
                }
            }
        for (int64_t i = count - 5; i < count; i++) ck_assert_float_eq(space[i], 0.0f);
    }
}
END_TEST

/* Hand-picked: cuDNN's LSTM forget gate (its k = 1) reads ONNX's third block (i o f c), and
 * cuDNN's GRU reset gate (k = 0) ONNX's second (z r h), in the backward direction. */
START_TEST(test_pack_hand_checked) {
    onnx_layer l;
    make_layer(4, 2, &l);
    kern_rnn_param_slot m[16], b[16];
    int64_t count = make_slots(4, 2, m, b);
    float space[512];
    kern_rnn_cudnn_desc d = desc_of(KERN_RNN_LSTM, 2);
    ck_assert_tci_ok(kern_rnn_cudnn_pack(&d, &l.view, m, b, space, count));
    /* direction 1, k = 1 (odd: column-major), unit 1, input 2: W[1][2H + 1][2] */
    const kern_rnn_param_slot *f = &m[8 + 1];
    ck_assert_float_eq(space[f->offset + 1 + 2 * H], w_value(1, 2 * H + 1, 2));
    ck_assert_float_eq(space[b[8 + 1].offset + 1], wb_value(1, 2 * H + 1));
    /* R's output gate (k = 4 + 3): R[1][H + 0][1] */
    const kern_rnn_param_slot *o = &m[8 + 7];
    ck_assert_float_eq(space[o->offset + 1 * H], r_value(1, H, 1));
    make_layer(3, 2, &l);
    count = make_slots(3, 2, m, b);
    d = desc_of(KERN_RNN_GRU, 2);
    ck_assert_tci_ok(kern_rnn_cudnn_pack(&d, &l.view, m, b, space, count));
    const kern_rnn_param_slot *r = &m[6 + 0]; /* even: row-major */
    ck_assert_float_eq(space[r->offset + 1 * IN + 0], w_value(1, H + 1, 0));
    ck_assert_float_eq(space[b[6 + 3].offset + 0], rb_value(1, H)); /* R's reset bias */
    /* without B, the biases are zeros */
    l.view.wb = l.view.rb = NULL;
    ck_assert_tci_ok(kern_rnn_cudnn_pack(&d, &l.view, m, b, space, count));
    ck_assert_float_eq(space[b[6 + 3].offset], 0.0f);
}
END_TEST

START_TEST(test_pack_bad_slots) {
    onnx_layer l;
    make_layer(1, 1, &l);
    kern_rnn_param_slot m[2], b[2];
    int64_t count = make_slots(1, 1, m, b);
    float space[64];
    kern_rnn_cudnn_desc d = desc_of(KERN_RNN_TANH, 1);
    m[1].cols = IN; /* the recurrent matrix is H x H */
    ck_assert_tci_error(kern_rnn_cudnn_pack(&d, &l.view, m, b, space, count), TCI_ERR_UNSUPPORTED,
                        "cuDNN's recurrent matrix slot is 2 x 3");
    count = make_slots(1, 1, m, b);
    ck_assert_tci_error(kern_rnn_cudnn_pack(&d, &l.view, m, b, space, m[0].offset + 2),
                        TCI_ERR_UNSUPPORTED, "slot ends at element");
}
END_TEST

START_TEST(test_refusals) {
    kern_rnn_cudnn_desc d = desc_of(KERN_RNN_LSTM, 2);
    float peep[2 * 3 * H] = {0};
    ck_assert_ptr_null(kern_rnn_cudnn_refusal(&d, NULL));
    ck_assert_ptr_null(kern_rnn_cudnn_refusal(&d, peep)); /* all-zero peepholes are none */
    peep[5] = 0.5f;
    ck_assert_str_eq(kern_rnn_cudnn_refusal(&d, peep), "LSTM peepholes: cuDNN's LSTM has none");
    d.dtype = TCI_DTYPE_FLOAT;
    ck_assert_ptr_null(kern_rnn_cudnn_refusal(&d, NULL));
    d.dtype = TCI_DTYPE_BFLOAT16;
    ck_assert_str_eq(kern_rnn_cudnn_refusal(&d, NULL),
                     "cuDNN's RNN runs fp16 and fp32 storage here");
    d = desc_of(KERN_RNN_LSTM, 1);
    d.reverse = true;
    ck_assert_str_eq(kern_rnn_cudnn_refusal(&d, NULL),
                     "direction reverse: cuDNN has no reverse-only RNN");
    d = desc_of(KERN_RNN_GRU, 2);
    d.has_seq_lens = true;
    ck_assert_str_eq(kern_rnn_cudnn_refusal(&d, NULL),
                     "sequence_lens: cuDNN takes the lengths on the host, the layer's are device "
                     "data");
    d = desc_of(KERN_RNN_GRU, 2);
    d.linear_before_reset = false;
    ck_assert_str_eq(kern_rnn_cudnn_refusal(&d, NULL),
                     "GRU linear_before_reset=0: cuDNN's GRU is the linear_before_reset=1 form");
    d = desc_of(KERN_RNN_TANH, 1);
    d.linear_before_reset = false; /* GRU's only */
    ck_assert_ptr_null(kern_rnn_cudnn_refusal(&d, NULL));
}
END_TEST

int main(void) {
    Suite *s = suite_create("rnn_cudnn_pack");
    TCase *tc = tcase_create("pack");
    tcase_add_test(tc, test_gate_orders);
    tcase_add_test(tc, test_pack_every_cell);
    tcase_add_test(tc, test_pack_hand_checked);
    tcase_add_test(tc, test_pack_bad_slots);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}

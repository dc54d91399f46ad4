#!/usr/bin/env python3
"""Single-node models of the smaller ops through tcinfer's CPU reference against onnxruntime, on
random inputs and the attribute combinations ONNX's node cases leave out (zero norms, pads with
ceil_mode, batch_dims, other axes, weighted losses with ignore_index...). Runs in this process
through the Python package (the library named by TCINFER_LIBRARY). Prints one line per case and
exits non-zero when any output differs beyond rtol 1e-5, atol 1e-6 (NaN meeting NaN; a case may
give a larger atol as a fifth item: onnxruntime's transforms round in fp32, tcinfer's in double).
"""
import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper

import tcinfer

RNG = np.random.default_rng(0)


def normal(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def model(node, inputs, opset):
    dtypes = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.int64): TP.INT64,
              np.dtype(np.int32): TP.INT32, np.dtype(np.bool_): TP.BOOL, np.dtype(np.int8): TP.INT8,
              np.dtype(np.uint8): TP.UINT8, np.dtype(np.float64): TP.DOUBLE}
    names = [n for n in node.input if n]
    inputs = [v for v in inputs if v is not None]  # None: an omitted optional input
    ins = [helper.make_tensor_value_info(n, dtypes[v.dtype], list(v.shape))
           for n, v in zip(names, inputs)]
    outs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
    m = helper.make_model(helper.make_graph([node], "g", ins, outs),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m.SerializeToString(), dict(zip(names, inputs))


def cases():
    x = normal(2, 3, 4)
    x[0, :, 1] = 0  # a zero norm along axis 1
    x4 = normal(2, 3, 5, 4)
    pos = np.abs(x4) + 0.1
    t = RNG.integers(0, 3, (2, 5, 4)).astype(np.int64)
    t[0, 0, 0] = -1
    node = helper.make_node
    yield "LpNormalization p=2 axis 1, a zero norm", \
        node("LpNormalization", ["x"], ["y"], axis=1, p=2), [x], 22
    yield "LpNormalization p=1 opset 7 (version 1)", \
        node("LpNormalization", ["x"], ["y"], p=1), [x], 7
    yield "Hardmax opset 11 axis 1 (2-D coercion)", node("Hardmax", ["x"], ["y"], axis=1), [x], 11
    yield "Hardmax opset 13 axis 1", node("Hardmax", ["x"], ["y"], axis=1), [x], 13
    yield "MeanVarianceNormalization default axes", \
        node("MeanVarianceNormalization", ["x"], ["y"]), [x4], 13
    yield "MeanVarianceNormalization axes 1, 3", \
        node("MeanVarianceNormalization", ["x"], ["y"], axes=[1, 3]), [x4], 9
    yield "LpPool p=3, pads, strides, ceil_mode", \
        node("LpPool", ["x"], ["y"], kernel_shape=[3, 2], pads=[1, 1, 1, 0], strides=[2, 2], p=3,
             ceil_mode=1), [x4], 18
    yield "LpPool SAME_UPPER", \
        node("LpPool", ["x"], ["y"], kernel_shape=[3, 3], auto_pad="SAME_UPPER"), [x4], 11
    yield "ReduceLogSum axes 1, 3", node("ReduceLogSum", ["x", "a"], ["y"], keepdims=0), \
        [pos, np.array([1, 3], np.int64)], 18
    yield "ReduceLogSum opset 13 attribute axes", \
        node("ReduceLogSum", ["x"], ["y"], axes=[0, 2]), [pos], 13
    yield "CumProd reverse exclusive", \
        node("CumProd", ["x", "a"], ["y"], reverse=1, exclusive=1), [x4, np.array(2, np.int64)], 26
    yield "GatherND batch_dims 1, negative indices", node("GatherND", ["x", "i"], ["y"], batch_dims=1), \
        [x4, RNG.integers(-3, 3, (2, 4, 2)).astype(np.int64)], 13
    yield "GatherND full tuples", node("GatherND", ["x", "i"], ["y"]), \
        [x4, np.array([[1, 2, 4, 3], [0, -1, -5, 0]], np.int64)], 11
    yield "Compress axis 2", node("Compress", ["x", "c"], ["y"], axis=2), \
        [x4, np.array([1, 0, 1, 1], bool)], 11
    yield "Compress flattened, short condition", node("Compress", ["x", "c"], ["y"]), \
        [x4, RNG.integers(0, 2, 50).astype(bool)], 9
    yield "ReverseSequence batch-major", \
        node("ReverseSequence", ["x", "l"], ["y"], batch_axis=0, time_axis=1), \
        [x4, np.array([3, 1], np.int64)], 10
    yield "EyeLike k=2", node("EyeLike", ["x"], ["y"], k=2), [x4[0, 0]], 22
    yield "EyeLike k=-3 int64", node("EyeLike", ["x"], ["y"], k=-3, dtype=TP.INT64), [x4[0, 0]], 9
    yield "BlackmanWindow symmetric", node("BlackmanWindow", ["s"], ["y"], periodic=0), \
        [np.array(7, np.int64)], 17
    yield "HammingWindow int32 size", node("HammingWindow", ["s"], ["y"]), \
        [np.array(10, np.int32)], 17
    yield "HannWindow double", node("HannWindow", ["s"], ["y"], output_datatype=TP.DOUBLE), \
        [np.array(6, np.int64)], 17
    yield "CenterCropPad axes 1, 3", node("CenterCropPad", ["x", "s"], ["y"], axes=[1, 3]), \
        [x4, np.array([6, 1], np.int64)], 18
    yield "Col2Im strides, pads, dilations", \
        node("Col2Im", ["x", "i", "b"], ["y"], strides=[2, 1], pads=[1, 0, 1, 1], dilations=[1, 2]), \
        [normal(2, 12, 6), np.array([5, 5], np.int64), np.array([2, 3], np.int64)], 18
    yield "AffineGrid 2-D", node("AffineGrid", ["t", "s"], ["y"]), \
        [normal(2, 2, 3), np.array([2, 3, 4, 5], np.int64)], 20
    yield "AffineGrid 3-D align_corners", node("AffineGrid", ["t", "s"], ["y"], align_corners=1), \
        [normal(1, 3, 4), np.array([1, 3, 2, 4, 3], np.int64)], 20
    yield "Det batched", node("Det", ["x"], ["y"]), [normal(2, 3, 5, 5)], 22
    yield "NegativeLogLikelihoodLoss weighted mean, ignore_index", \
        node("NegativeLogLikelihoodLoss", ["x", "t", "w"], ["y"], ignore_index=-1), \
        [x4, t, np.array([0.2, 1, 3], np.float32)], 22
    yield "NegativeLogLikelihoodLoss sum", \
        node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="sum", ignore_index=-1), \
        [x4, t], 13
    yield "SoftmaxCrossEntropyLoss none with log_prob", \
        node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y", "lp"], reduction="none",
             ignore_index=-1), [x4, t], 13
    yield "SoftmaxCrossEntropyLoss mean of nothing (NaN)", \
        node("SoftmaxCrossEntropyLoss", ["x", "t"], ["y"], ignore_index=-1), \
        [x4, np.full((2, 5, 4), -1, np.int64)], 12
    feat = normal(2, 3, 10, 12)
    boxes = np.array([[0, 0, 9, 9], [2.5, 1.2, 11.7, 8.3], [-3, -2, 4, 5], [6, 7, 30, 20],
                      [4, 4, 4.2, 4.1]], np.float32)
    owners = np.array([0, 1, 1, 0, 1], np.int64)
    yield "RoiAlign adaptive sampling, boxes past the edges", \
        node("RoiAlign", ["x", "r", "b"], ["y"], output_height=3, output_width=4,
             spatial_scale=0.8), [feat, boxes, owners], 16
    yield "RoiAlign max adaptive", \
        node("RoiAlign", ["x", "r", "b"], ["y"], mode="max", output_height=2, output_width=2), \
        [feat, boxes, owners], 16
    yield "RoiAlign opset 10 (output_half_pixel), sampling_ratio 3", \
        node("RoiAlign", ["x", "r", "b"], ["y"], output_height=2, output_width=3,
             sampling_ratio=3, spatial_scale=0.5), [feat, boxes, owners], 10
    sig = normal(2, 37, 3, 1)
    spec = normal(2, 37, 3, 2)
    i64 = lambda v: np.array(v, np.int64)
    yield "DFT complex, dft_length 64 (zero-padded, radix 2), axis 1", \
        node("DFT", ["x", "n", "a"], ["y"]), [spec, i64(64), i64(1)], 20, 1e-4
    yield "DFT real, dft_length 29 (truncated, Bluestein)", \
        node("DFT", ["x", "n", "a"], ["y"]), [sig, i64(29), i64(-3)], 20, 1e-4
    yield "DFT inverse of a real input, axis 2", \
        node("DFT", ["x", "", "a"], ["y"], inverse=1), [sig, i64(2)], 20, 1e-5
    yield "DFT rfft, odd length 37", \
        node("DFT", ["x", "", "a"], ["y"], onesided=1), [sig, i64(1)], 20, 1e-4
    yield "DFT irfft, odd dft_length 37", \
        node("DFT", ["x", "n", "a"], ["y"], onesided=1, inverse=1), \
        [spec[:, :19], i64(37), i64(1)], 20, 1e-5
    # onnxruntime's fp32 transform of a prime length is off by ~0.03 here (tcinfer's, in double,
    # by 4e-6 against numpy's double FFT): a coarse check; test_spectral holds the FFTs to 1e-12
    yield "DFT prime length 1009 (Bluestein)", \
        node("DFT", ["x"], ["y"]), [normal(1, 1009, 2)], 20, 0.1
    yield "DFT opset 17, axis attribute 2", \
        node("DFT", ["x"], ["y"], axis=2), [spec], 17, 1e-5
    yield "STFT complex, onesided 0, frame_length input, step 3", \
        node("STFT", ["s", "t", "", "l"], ["y"], onesided=0), \
        [normal(2, 50, 2), i64(3), i64(12)], 17, 1e-4
    yield "STFT Hann window of 24, step 8", \
        node("STFT", ["s", "t", "w"], ["y"]), \
        [normal(1, 100, 1), i64(8), (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(24) / 24))
         .astype(np.float32)], 17, 1e-4
    yield "MelWeightMatrix 40 bins, 512-point DFT at 16 kHz", \
        node("MelWeightMatrix", ["m", "d", "r", "lo", "hi"], ["y"]), \
        [i64(40), i64(512), i64(16000), np.array(20, np.float32),
         np.array(8000, np.float32)], 17
    yield "MelWeightMatrix int32 sizes, output double", \
        node("MelWeightMatrix", ["m", "d", "r", "lo", "hi"], ["y"], output_datatype=TP.DOUBLE), \
        [np.array(8, np.int32), np.array(100, np.int32), np.array(8000, np.int32),
         np.array(0, np.float32), np.array(3000, np.float32)], 17
    ints = RNG.integers(0, 3, (3, 4, 2)).astype(np.int64)
    ints[:, 2] = ints[:, 0]  # a repeated slice along axis 1
    yield "Unique axis 1 of int64, not sorted, four outputs", \
        node("Unique", ["x"], ["y", "i", "v", "c"], axis=1, sorted=0), [ints], 11
    yield "Unique axis -1 of float, sorted", \
        node("Unique", ["x"], ["y", "i", "v", "c"], axis=-1), \
        [np.round(normal(2, 6)).astype(np.float32)[:, [0, 1, 0, 2, 3, 1]]], 11
    yield "Unique flattened int8, Y alone, not sorted", \
        node("Unique", ["x"], ["y"], sorted=0), \
        [RNG.integers(-4, 4, (5, 7)).astype(np.int8)], 11
    yield "Unique flattened, Y and counts", node("Unique", ["x"], ["y", "", "", "c"]), \
        [np.round(x * 2)], 11
    # MaxPool's indices of a 5 x 5 map (kernel 2, stride 2: the last row and column unread)
    # into output_shape, the map's own shape
    pooled = np.array([[[[5, 6], [7, 8]], [[1, 2], [3, 4]]]], np.float32)
    pool_idx = np.array([[[[6, 8], [16, 18]], [[25, 28], [40, 43]]]], np.int64)
    yield "MaxUnpool output_shape of MaxPool's input (5 x 5)", \
        node("MaxUnpool", ["x", "i", "s"], ["y"], kernel_shape=[2, 2], strides=[2, 2]), \
        [pooled, pool_idx, np.array([1, 2, 5, 5], np.int64)], 11
    yield "MaxUnpool 1-D with pads, opset 9", \
        node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 0]), \
        [normal(2, 1, 4), np.array([[[0, 2, 4, 7]], [[9, 10, 13, 15]]], np.int64)], 9
    yield "MaxUnpool 3-D", \
        node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2, 2], strides=[2, 2, 2]), \
        [normal(1, 1, 1, 2, 1), np.array([[[[[3], [13]]]]], np.int64)], 22
    yield "BitwiseXor int8 broadcast (2, 1, 4) ^ (3, 1)", node("BitwiseXor", ["a", "b"], ["y"]), \
        [RNG.integers(-128, 128, (2, 1, 4)).astype(np.int8),
         RNG.integers(-128, 128, (3, 1)).astype(np.int8)], 18
    yield "BitwiseAnd int64 broadcast", node("BitwiseAnd", ["a", "b"], ["y"]), \
        [RNG.integers(-2**62, 2**62, (3, 4)), RNG.integers(-2**62, 2**62, (4,))], 18
    yield "BitwiseNot int32", node("BitwiseNot", ["a"], ["y"]), \
        [RNG.integers(-2**31, 2**31, (2, 5)).astype(np.int32)], 18
    yield "BitShift uint8 LEFT broadcast, opset 11", \
        node("BitShift", ["a", "b"], ["y"], direction="LEFT"), \
        [RNG.integers(0, 256, (2, 3)).astype(np.uint8), np.array([0, 3, 7], np.uint8)], 11
    yield "BitShift uint8 RIGHT, opset 11", \
        node("BitShift", ["a", "b"], ["y"], direction="RIGHT"), \
        [RNG.integers(0, 256, (4,)).astype(np.uint8), np.array([1, 2, 5, 7], np.uint8)], 11
    special = np.array([[0.0, -0.0, np.inf], [-np.inf, np.nan, 1.5e-40]], np.float32)
    yield "BitCast float to int32: -0, infinities, NaN, a denormal", \
        node("BitCast", ["x"], ["y"], to=TP.INT32), [special], 26
    yield "BitCast int64 to double", node("BitCast", ["x"], ["y"], to=TP.DOUBLE), \
        [RNG.integers(-2**62, 2**62, (2, 3))], 26
    yield "BitCast int32 to float", node("BitCast", ["x"], ["y"], to=TP.FLOAT), \
        [RNG.integers(-2**31, 2**31, (5,)).astype(np.int32) & 0x3FFFFFFF], 26
    yield "BitCast uint8 to int8", node("BitCast", ["x"], ["y"], to=TP.INT8), \
        [RNG.integers(0, 256, (2, 4)).astype(np.uint8)], 26
    # taps reach past the image's edges; atol 1e-5: the fp32 sums of 18 to 27 products in
    # another order than onnxruntime's (both within 2e-6 of a float64 evaluation)
    offsets = normal(2, 2 * 9 * 2, 3, 3) * 2
    yield "DeformConv group 2, offset_group 2, stride 2, pads, mask and bias", \
        node("DeformConv", ["x", "w", "o", "b", "m"], ["y"], group=2, offset_group=2,
             strides=[2, 2], pads=[1, 1, 1, 1]), \
        [normal(2, 4, 6, 5), normal(6, 2, 3, 3), offsets, normal(6),
         RNG.random((2, 2 * 9, 3, 3)).astype(np.float32)], 22, 1e-5
    yield "DeformConv dilation 2, rectangular kernel, no pads", \
        node("DeformConv", ["x", "w", "o"], ["y"], dilations=[2, 1], kernel_shape=[2, 3]), \
        [normal(1, 3, 7, 6), normal(2, 3, 2, 3), normal(1, 2 * 6, 5, 4)], 19, 1e-5
    yield "TensorScatter axis 1 of (batch, seq, dim), circular wrap", \
        node("TensorScatter", ["c", "u", "i"], ["y"], axis=1, mode="circular"), \
        [normal(3, 5, 4), normal(3, 3, 4), np.array([0, 3, 4], np.int64)], 24
    yield "TensorScatter axis -3 of (batch, seq, heads, dim), no write_indices", \
        node("TensorScatter", ["c", "u"], ["y"], axis=-3), \
        [normal(2, 6, 2, 3), normal(2, 4, 2, 3)], 24
    yield "CausalConvWithState kernel 3, bias, past_state, silu, length 9", \
        node("CausalConvWithState", ["x", "w", "b", "s"], ["y", "st"], activation="silu"), \
        [normal(3, 5, 9), normal(5, 1, 3), normal(5), normal(3, 5, 2)], 27
    yield "CausalConvWithState kernel 6, a 2-long input", \
        node("CausalConvWithState", ["x", "w", "", "s"], ["y", "st"]), \
        [normal(1, 3, 2), normal(3, 1, 6), normal(1, 3, 5)], 27
    vec = [helper.make_tensor_value_info(n, TP.FLOAT, [3]) for n in ("s", "a", "r", "s1", "o")]
    body = helper.make_graph([node("Add", ["s", "a"], ["s1"]), node("Mul", ["s1", "r"], ["o"])],
                             "body", vec[:3], vec[3:])
    xs = normal(2, 4, 3)
    yield "Scan-8 sequence_lens 4 and 2 (zeros past them), a reversed scan input", \
        node("Scan", ["lens", "init", "x", "xr"], ["final", "ys"], body=body, num_scan_inputs=2,
             directions=[0, 1]), [np.array([4, 2], np.int64), normal(2, 3), xs, xs + 1], 8
    decay = -np.abs(normal(2, 6, 2)) * 0.3
    yield "LinearAttention gated_delta, GQA 2, d_k 4 != d_v 3, per-head decay, beta 1, scale", \
        node("LinearAttention", ["q", "k", "v", "s", "g", "b"], ["y", "st"], q_num_heads=4,
             kv_num_heads=2, scale=0.7), \
        [normal(2, 6, 16), normal(2, 6, 8) * 0.5, normal(2, 6, 6), normal(2, 2, 4, 3), decay,
         RNG.random((2, 6, 1)).astype(np.float32)], 27, 1e-5
    yield "LinearAttention delta with past_state, d_k 3, d_v 5", \
        node("LinearAttention", ["q", "k", "v", "s", "", "b"], ["y", "st"], q_num_heads=2,
             kv_num_heads=2, update_rule="delta"), \
        [normal(1, 5, 6), normal(1, 5, 6) * 0.5, normal(1, 5, 10), normal(1, 2, 3, 5), None,
         RNG.random((1, 5, 2)).astype(np.float32)], 27, 1e-5
    yield "LinearAttention gated, MQA (4 query heads, 1 KV head), per-key decay", \
        node("LinearAttention", ["q", "k", "v", "", "g"], ["y", "st"], q_num_heads=4,
             kv_num_heads=1, update_rule="gated"), \
        [normal(2, 3, 8), normal(2, 3, 2), normal(2, 3, 4), None,
         -np.abs(normal(2, 3, 2))], 27, 1e-5
    # a pool of 6 unigrams, 8 bigrams and 4 trigrams of tokens 0..9 (distinct, as onnxruntime
    # requires), in shuffled output columns; rows of 12 tokens drawn from the same 10
    grams = [RNG.choice(10, 6, replace=False).reshape(6, 1)]
    for n, count in ((2, 8), (3, 4)):
        seen = {}
        while len(seen) < count:
            g = tuple(int(t) for t in RNG.integers(0, 10, n))
            seen[g] = g
        grams.append(np.array(list(seen.values())))
    pool = np.concatenate([g.reshape(-1) for g in grams]).astype(np.int64).tolist()
    tfidf = dict(ngram_counts=[0, 6, 22], ngram_indexes=RNG.permutation(18).tolist(),
                 pool_int64s=pool)
    idf = (RNG.random(18) * 3).astype(np.float32).tolist()
    tokens = RNG.integers(0, 10, (5, 12))
    tokens[1, 3:6] = grams[2][0]  # a trigram for sure, and one at skip 1
    tokens[2, [0, 2, 4]] = grams[2][1]
    yield "TfIdfVectorizer TF 1- to 3-grams, skips up to 2, shuffled columns", \
        node("TfIdfVectorizer", ["x"], ["y"], mode="TF", min_gram_length=1, max_gram_length=3,
             max_skip_count=2, **tfidf), [tokens], 9
    yield "TfIdfVectorizer TFIDF bigrams and trigrams, weights, int32", \
        node("TfIdfVectorizer", ["x"], ["y"], mode="TFIDF", min_gram_length=2, max_gram_length=3,
             max_skip_count=1, weights=idf, **tfidf), [tokens.astype(np.int32)], 9
    yield "TfIdfVectorizer IDF unigrams and bigrams, weights, 1-D, skip 4", \
        node("TfIdfVectorizer", ["x"], ["y"], mode="IDF", min_gram_length=1, max_gram_length=2,
             max_skip_count=4, weights=idf, **tfidf), [tokens[0]], 9
    yield "TfIdfVectorizer TFIDF unigrams, two n-grams per column", \
        node("TfIdfVectorizer", ["x"], ["y"], mode="TFIDF", min_gram_length=1, max_gram_length=1,
             max_skip_count=0, ngram_counts=[0], ngram_indexes=[0, 1, 0, 2, 1, 0],
             pool_int64s=[0, 1, 2, 3, 4, 5], weights=[0.5, 1, 2, 4, 8, 16]), [tokens], 9


def main():
    failed = 0
    count = 0
    for name, node, inputs, opset, *tolerance in cases():
        atol = tolerance[0] if tolerance else 1e-6
        count += 1
        data, feeds = model(node, inputs, opset)
        options = ort.SessionOptions()
        options.log_severity_level = 3  # errors only
        want = ort.InferenceSession(data, options,
                                    providers=["CPUExecutionProvider"]).run(None, feeds)
        try:
            with tcinfer.Engine(data, backend="cpu") as engine:
                got = engine.run(feeds)
        except tcinfer.TcinferError as e:
            print(f"FAIL {name}: {e}")
            failed += 1
            continue
        problems = []
        for i, (g, w) in enumerate(zip(got, want)):
            if g.dtype != w.dtype or g.shape != w.shape:
                problems.append(f"output {i}: {g.dtype}{list(g.shape)}, onnxruntime "
                                f"{w.dtype}{list(w.shape)}")
            elif not np.allclose(g, w, rtol=1e-5, atol=atol, equal_nan=True):
                worst = np.nanmax(np.abs(g.astype(np.float64) - w))
                problems.append(f"output {i}: max abs difference {worst:.3g}")
        if len(got) != len(want):
            problems.append(f"{len(got)} outputs, onnxruntime {len(want)}")
        print(f"{'FAIL' if problems else 'ok  '} {name}{': ' if problems else ''}"
              f"{'; '.join(problems)}")
        failed += bool(problems)
    print(f"ops_vs_onnxruntime: {count - failed} of {count} match")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

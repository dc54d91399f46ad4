#!/usr/bin/env python3
"""silero-vad's main export (silero_vad.onnx of the pinned silero-vad wheel, which branches on
the sample rate with nested If nodes) on tcinfer's CPU reference against onnxruntime.

The model's own streaming interface at 16 kHz (512 new samples after the previous call's last 64)
and at 8 kHz (256 after 32), over a few windows of bench/real_weights.py's seeded speech-like
signal (decimated for 8 kHz), the state carried from call to call on each side. Compared per
window: the speech probability (max abs difference) and the state (relative L2).

Exit status 0 when every check passes, 1 otherwise, 2 when the model is not installed.
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import real_weights as rw  # noqa: E402

MODEL = ("silero-vad", "silero_vad/data/silero_vad.onnx", 2327524,
         "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3")
RATES = {16000: (512, 64), 8000: (256, 32)}   # new samples and context per call
WINDOWS = 12
PROB_ABS = 1e-5
STATE_REL_L2 = 1e-5


def model_path():
    dist, inner, size, digest = MODEL
    saved = rw.MODELS
    rw.MODELS = {"vad_if": MODEL}
    try:
        paths, why = rw.models_installed()
    finally:
        rw.MODELS = saved
    if not paths:
        raise rw.SetupError(why)
    return paths["vad_if"]


def stream(run, signal, rate):
    chunk, context_len = RATES[rate]
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(context_len, np.float32)
    probs, states = [], []
    sr = np.array(rate, np.int64)
    for w in range(WINDOWS):
        x = np.concatenate([context, signal[w * chunk:(w + 1) * chunk]])[None]
        out, state = run({"input": x, "state": state, "sr": sr})
        probs.append(float(np.asarray(out).reshape(-1)[0]))
        states.append(np.array(state))
        context = x[0, -context_len:]
    return np.array(probs), states


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--library", help="libtcinfer.so to load (default: $TCINFER_LIBRARY)")
    args = p.parse_args()
    if args.library:
        os.environ["TCINFER_LIBRARY"] = args.library
    sys.path.insert(0, os.path.join(ROOT, "python"))
    try:
        path = model_path()
    except rw.SetupError as e:
        print("silero_vad_if: %s" % e)
        return 2
    import onnxruntime as ort
    import tcinfer
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    signal16 = rw.vad_signal(0)
    # skip the first second's quiet, so the windows hold voiced and noisy parts as well
    signal16 = signal16[16000:]
    ok = True
    for rate in RATES:
        chunk, context_len = RATES[rate]
        signal = signal16 if rate == 16000 else 0.5 * (signal16[0::2] + signal16[1::2])
        engine = tcinfer.Engine(path, backend="cpu",
                                shapes={"input": [1, chunk + context_len], "state": [2, 1, 128],
                                        "sr": []})
        try:
            got, got_states = stream(engine.run, signal.astype(np.float32), rate)
        finally:
            engine.close()
        ref, ref_states = stream(lambda feeds: session.run(None, feeds),
                                 signal.astype(np.float32), rate)
        prob_abs = float(np.abs(got - ref).max())
        state_l2 = max(rw.rel_l2(g, r) for g, r in zip(got_states, ref_states))
        good = prob_abs <= PROB_ABS and state_l2 <= STATE_REL_L2
        ok = ok and good
        print("%d Hz: %d windows of %d samples, probabilities %s, max abs diff %.2e (bound %.0e), "
              "state rel L2 %.2e (bound %.0e): %s"
              % (rate, WINDOWS, chunk, np.round(ref, 3).tolist(), prob_abs, PROB_ABS, state_l2,
                 STATE_REL_L2, "ok" if good else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

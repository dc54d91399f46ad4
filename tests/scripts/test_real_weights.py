#!/usr/bin/env python3
"""bench/real_weights.py's pieces without the models: the OCR pipeline's regions, boxes and CTC
decoding, the comparison of two backends' answers, the VAD signal, and the errors of the model
sources and arguments."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import ocr_pipeline as ocr  # noqa: E402
import real_weights as rw  # noqa: E402


class PipelineTest(unittest.TestCase):
    def test_components_join_diagonals_only(self):
        m = np.zeros((6, 8), bool)
        m[0, 0] = m[1, 1] = True          # diagonal neighbours: one region
        m[0, 4:7] = m[1, 6] = True        # an L: one region
        m[4:6, 0:2] = True                # apart from the first by a row
        m[4, 5] = True                    # a lone pixel
        self.assertEqual(ocr._components(m),
                         [(0, 0, 2, 2), (0, 4, 2, 7), (4, 0, 6, 2), (4, 5, 5, 6)])

    def test_det_boxes_unclip_and_filters(self):
        prob = np.zeros((64, 96), np.float32)
        prob[10:20, 10:50] = 0.9          # 40 x 10: unclipped by 40*10*1.6/(2*50) = 6.4
        prob[40:42, 60:90] = 0.9          # 2 rows high: under MIN_SIZE, dropped
        prob[30:36, 70:80] = 0.4          # above the threshold, its mean under BOX_THRESH
        self.assertEqual(ocr.det_boxes(prob), [(4, 4, 56, 26)])

    def test_det_boxes_sorted_in_reading_order(self):
        prob = np.zeros((64, 96), np.float32)
        prob[40:50, 5:25] = prob[10:20, 60:90] = prob[11:21, 5:25] = 0.9
        xs = [(b[0], b[1]) for b in ocr.det_boxes(prob)]
        self.assertEqual([x for x, _ in xs], sorted(x for x, _ in xs[:2]) + [xs[2][0]])
        self.assertLess(xs[1][1], xs[2][1])

    def test_ctc_greedy(self):
        labels = ["blank", "a", "b", " "]
        steps = [1, 1, 0, 1, 2, 2, 3, 0, 0, 2]
        probs = np.eye(4, dtype=np.float32)[steps][None]
        self.assertEqual(ocr.ctc_greedy(probs, labels), ["aab b"])
        with self.assertRaisesRegex(ValueError, "gives 4 classes, the dictionary 3 labels"):
            ocr.ctc_greedy(probs, labels[:3])

    def test_batches_pad_with_zeros(self):
        crops = [np.full((20, 40, 3), 255, np.uint8), np.zeros((10, 100, 3), np.uint8)]
        x = ocr.rec_input(crops)
        self.assertEqual(x.shape, (2, 3, 48, 480))        # the widest: 48 * 100 / 10
        self.assertTrue(np.all(x[0, :, :, :96] == 1.0) and np.all(x[0, :, :, 96:] == 0.0))
        self.assertTrue(np.all(x[1] == -1.0))
        self.assertEqual(ocr.cls_input(crops).shape, (2, 3, 48, 192))

    def test_text_lines_seeded(self):
        a, b = ocr.text_lines(0, 6), ocr.text_lines(0, 6)
        self.assertEqual(a, b)
        self.assertNotEqual(a, ocr.text_lines(1, 6))
        self.assertTrue(any(c.isdigit() for c in a[0]))
        self.assertTrue(any(c in "".join(ocr.PUNCT) for c in a[2]))


def answers(boxes, classes, texts):
    return {"boxes": boxes, "classes": classes, "texts": texts}


class CompareTest(unittest.TestCase):
    REF = answers([(0, (0, 0, 100, 20)), (0, (0, 40, 100, 60)), (1, (0, 0, 50, 20))],
                  [0, 180, 0], ["abc", "d-e", "12"])

    def test_same_answers(self):
        got = answers(list(reversed(self.REF["boxes"])), [0, 180, 0], ["12", "d-e", "abc"])
        r = rw.ocr_compare(self.REF, got)
        self.assertTrue(r["ok"], r["differences"])
        self.assertEqual((r["matched"], r["same_classes"], r["same_texts"]), (3, 3, 3))

    def test_each_difference_fails(self):
        shifted = answers([(0, (0, 0, 100, 20)), (0, (0, 43, 100, 63)), (1, (0, 0, 50, 20))],
                          [0, 180, 0], ["abc", "d-e", "12"])
        self.assertFalse(rw.ocr_compare(self.REF, shifted)["ok"])      # IoU 0.74
        self.assertFalse(rw.ocr_compare(self.REF, answers(self.REF["boxes"], [0, 0, 0],
                                                          self.REF["texts"]))["ok"])
        r = rw.ocr_compare(self.REF, answers(self.REF["boxes"], [0, 180, 0], ["abc", "d-e", "1Z"]))
        self.assertFalse(r["ok"])
        self.assertIn("'1Z', reference '12'", r["differences"][0])
        # a box on another page, or one box fewer, is not the same answer
        self.assertFalse(rw.ocr_compare(self.REF, answers(
            [(0, (0, 0, 100, 20)), (0, (0, 40, 100, 60)), (0, (0, 0, 50, 20))], [0, 180, 0],
            ["abc", "d-e", "12"]))["ok"])
        self.assertFalse(rw.ocr_compare(self.REF, answers(self.REF["boxes"][:2], [0, 180],
                                                          ["abc", "d-e"]))["ok"])

    def test_read_accuracy(self):
        truth = [(0, (0, 0, 100, 20), "abc", False), (0, (0, 40, 100, 60), "d-e", True),
                 (1, (200, 0, 250, 20), "12", False)]
        r = rw.read_accuracy(answers(self.REF["boxes"], [0, 180, 0], ["abd", "d-e", "12"]), truth)
        # 'abc' misread by one, '12' not found (the box is elsewhere): 3 of 8 characters wrong
        self.assertEqual((r["exact_lines"], r["missed_lines"]), (1, 1))
        self.assertAlmostEqual(r["char_accuracy"], 1 - 3 / 8)
        r = rw.read_accuracy(answers(self.REF["boxes"], [0], ["a bc", "d - e", "12"]), truth[:2])
        self.assertAlmostEqual(r["char_accuracy"], 1 - 3 / 6)
        self.assertEqual(r["char_accuracy_without_spaces"], 1.0)

    def test_levenshtein_iou(self):
        self.assertEqual(rw.levenshtein("kitten", "sitting"), 3)
        self.assertEqual(rw.levenshtein("", "ab"), 2)
        self.assertAlmostEqual(rw.iou((0, 0, 10, 10), (5, 0, 15, 10)), 1 / 3)
        self.assertEqual(rw.iou((0, 0, 10, 10), (20, 0, 30, 10)), 0.0)


class VadTest(unittest.TestCase):
    def test_signal_and_streaming(self):
        s = rw.vad_signal(0)
        self.assertEqual(len(s), int(sum(t for _, t in rw.VAD_SCRIPT) * rw.VAD_RATE))
        self.assertTrue(np.array_equal(s, rw.vad_signal(0)))
        self.assertLess(np.abs(s).max(), 1.0)

        class Echo:
            """Speech probability: the mean of the input; the state counts the calls."""
            def __init__(self):
                self.inputs = []

            def run(self, key, feeds):
                self.inputs.append(feeds["input"].copy())
                return [np.array([[feeds["input"].mean()]], np.float32), feeds["state"] + 1]

        e = Echo()
        probs = rw.vad_probabilities(e, s)
        self.assertEqual(len(probs), len(s) // rw.VAD_CHUNK)
        self.assertEqual(e.inputs[0].shape, (1, rw.VAD_CONTEXT + rw.VAD_CHUNK))
        self.assertTrue(np.all(e.inputs[0][0, :rw.VAD_CONTEXT] == 0))
        # each call's context is the end of the previous call's input
        self.assertTrue(np.array_equal(e.inputs[1][0, :rw.VAD_CONTEXT],
                                       e.inputs[0][0, -rw.VAD_CONTEXT:]))


class Mean:
    """A stand-in VAD model: the speech probability is the mean of the input."""
    name, errors = "mean", (RuntimeError,)

    def __init__(self, scale=1.0):
        self.scale = scale

    def run(self, key, feeds):
        return [np.array([[self.scale * np.abs(feeds["input"]).mean() * 20]], np.float32),
                feeds["state"]]


class Failing(Mean):
    name = "failing"

    def run(self, key, feeds):
        raise RuntimeError("no GPU here")


class BackendErrorTest(unittest.TestCase):
    def test_error_is_the_backends_answer(self):
        r = rw.vad_task(Mean(), [Mean(1.001), Failing()], 0)
        self.assertTrue(0 < r["onnxruntime"]["speech_chunks"] < r["chunks"])
        self.assertEqual(r["backends"]["failing"], {"error": "no GPU here"})
        self.assertLess(r["backends"]["mean"]["max_abs"], 1e-2)
        ocr_ok = {"answers": {"boxes": 1, "ref_boxes": 1, "matched": 1, "min_iou": 1.0,
                              "same_classes": 1, "same_texts": 1, "differences": [], "ok": True},
                  "models": {"det": {"rel_l2": 1e-7, "rel_l2_fp64": 1e-7}}}
        result = {"ocr": {"upside_down": 1, "lines": 1,
                          "onnxruntime": {"char_accuracy": 1.0, "missed_lines": 0, "lines": 1,
                                          "turned": 1, "det_rel_l2_fp64": 1e-8},
                          "backends": {"mean": ocr_ok, "failing": {"error": "no GPU here"}}},
                  "vad": r}
        got = {c: ok for c, ok in rw.checks(result, cpu=False)}
        self.assertFalse(got["failing: OCR: no GPU here"])
        self.assertFalse(got["failing: VAD: no GPU here"])
        # the stand-in's probabilities differ by 0.1 %: decisions only flip near 0.5
        flips = r["backends"]["mean"]["decisions_differ"]
        self.assertEqual(got["mean: VAD decisions at 0.5 as onnxruntime's" + (
            "" if not flips else " (chunks %s differ)" % flips[:10])], not flips)
        self.assertIn("| failing | error |", rw.report(dict(result, ocr=dict(
            result["ocr"], pages=1, onnxruntime=dict(result["ocr"]["onnxruntime"], boxes=1,
                                                     exact_lines=1,
                                                     char_accuracy_without_spaces=1.0)))))


class SetupTest(unittest.TestCase):
    def test_models_dir_checked(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(rw.SetupError, "ch_PP-OCRv4_det_infer.onnx is missing"):
                rw.models_from_dir(d)
            for key, m in rw.MODELS.items():
                with open(os.path.join(d, os.path.basename(m[1])), "wb") as fh:
                    fh.write(b"x" * m[2])
            with self.assertRaisesRegex(rw.SetupError, "is not the pinned file"):
                rw.models_from_dir(d)

    def test_arguments(self):
        for argv in (["--precision", "bf16"], ["--backend", "gpu", "--precision", "fp16,int8"],
                     ["--backend", "gpu", "--precision", ""], ["--pages", "0"],
                     ["--timing-cache", "t.cache"]):
            with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
                rw.parse_args(argv)
        self.assertEqual(rw.parse_args(["--backend", "gpu", "--precision", "fp16,bf16,auto"])
                         .precisions, ["fp16", "bf16", "auto"])


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Real-weight models give the same task answer through tcinfer as through onnxruntime.

The weights come from two pinned PyPI wheels (the only source of real weights here):
rapidocr-onnxruntime (PP-OCRv4 text detection and recognition, the PP-OCR text-direction
classifier, the recognition dictionary inside the recognition model's metadata) and silero-vad
(the voice-activity detector). Two tasks, each run end to end on onnxruntime (fp32 CPU) and on
tcinfer (the fp32 CPU reference, or with --backend gpu the tensor-core engine in each
--precision):

- OCR: seeded text lines (digits, mixed case, punctuation; some upside down) rendered with
  Pillow on pages; detection -> probability map -> boxes -> crops -> direction class (rotated
  back when 180) -> recognition -> CTC greedy decoding -> text. Compared: each model's output
  on the same input (relative L2 against onnxruntime, and for detection, whose last op is a
  Sigmoid on logits down to -50 where onnxruntime's own sigmoid is the larger error, against
  onnxruntime's logits through a float64 sigmoid), and the answers: the same boxes (IoU >= 0.9
  each), the same direction classes, the same text (exact string); onnxruntime's own reading of
  the rendered text (character accuracy).
- VAD: a seeded synthetic signal (noise, silence, harmonic voiced-like segments with formant
  envelopes), run 512 samples at a time carrying the model's state and its 64-sample context
  (the model's own interface); compared: the per-chunk speech probabilities (max abs diff) and
  the speech decisions at 0.5.

Where the models come from (first that applies): --models DIR (the files, as --extract writes
them: for a machine without network), the pinned packages installed in this Python
(tests/requirements-nodeps.txt), or `pip download --no-deps` of the pinned wheels into --cache.
Every file is checked against its SHA-256.

Exit status 0 when every check passes, 1 otherwise, 2 on a usage or setup error.
"""

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_models import markdown_table  # noqa: E402
from zoo import rel_l2  # noqa: E402
import ocr_pipeline as ocr  # noqa: E402

# ---------------------------------------------------------------- the pinned models

WHEELS = {"rapidocr-onnxruntime": "1.4.4", "silero-vad": "6.2.3"}
# key: (distribution, path inside the wheel, bytes, sha256)
MODELS = {
    "det": ("rapidocr-onnxruntime", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
            4745517, "d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9"),
    "cls": ("rapidocr-onnxruntime", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
            585532, "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"),
    "rec": ("rapidocr-onnxruntime", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
            10857958, "48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b"),
    # the 16 kHz export without If (silero_vad.onnx branches on the sample rate with If, which
    # runs on the CPU reference only: tests/models/silero_vad_if.py checks it there): input
    # [1, 64 + 512], state [2, 1, 128]
    "vad": ("silero-vad", "silero_vad/data/silero_vad_openvino_16k.onnx",
            1288203, "7776b81ad1b0350c15d7f1555943b9232eb53e9ca5d989c6d0cea9ebc8664d87"),
}

CPU_REL_L2 = 1e-5        # tcinfer's CPU reference against onnxruntime, per model
CPU_FP64_MARGIN = 1.25   # past it: no further from float64 than onnxruntime, within this factor
CPU_VAD_ABS = 1e-5       # speech probabilities, CPU reference against onnxruntime
BOX_IOU = 0.9
MIN_ORT_CHAR_ACCURACY = 0.9   # the pipeline itself must read the rendered text


class SetupError(Exception):
    pass


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def checked(paths, where):
    for key, path in paths.items():
        _, _, size, digest = MODELS[key]
        if not os.path.isfile(path):
            raise SetupError("%s: %s is missing" % (where, path))
        if os.path.getsize(path) != size or sha256(path) != digest:
            raise SetupError("%s: %s is not the pinned file (expected %d bytes, sha256 %s)"
                             % (where, path, size, digest))
    return paths


def models_from_dir(folder):
    return checked({k: os.path.join(folder, os.path.basename(m[1])) for k, m in MODELS.items()},
                   "--models %s" % folder)


def models_installed():
    """The models inside the pinned packages installed in this Python, or None with the reason."""
    paths = {}
    for key, (dist, inner, _, _) in MODELS.items():
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None, "%s is not installed in %s" % (dist, sys.executable)
        if version != WHEELS[dist]:
            return None, "%s %s is installed, not the pinned %s" % (dist, version, WHEELS[dist])
        top = inner.split("/")[0]
        # find_spec locates the package without importing it (rapidocr's __init__ needs OpenCV)
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.submodule_search_locations:
            return None, "package %s of %s not found" % (top, dist)
        root = os.path.dirname(list(spec.submodule_search_locations)[0])
        paths[key] = os.path.join(root, inner)
    return checked(paths, "installed packages"), None


def models_downloaded(cache):
    """pip download --no-deps of the pinned wheels into CACHE/wheels, the models extracted to
    CACHE/models."""
    wheels, out = os.path.join(cache, "wheels"), os.path.join(cache, "models")
    os.makedirs(wheels, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    paths = {k: os.path.join(out, os.path.basename(m[1])) for k, m in MODELS.items()}
    try:
        return checked(paths, "cache")
    except SetupError:
        pass
    for dist, version in WHEELS.items():
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "-q", "--dest", wheels, "%s==%s" % (dist, version)]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            tail = " ".join(p.stdout.strip().splitlines()[-2:])
            raise SetupError("cannot download %s==%s (%s); on a machine without network pass "
                             "--models DIR with the files that --extract wrote elsewhere"
                             % (dist, version, tail or "pip exit %d" % p.returncode))
    for key, (dist, inner, _, _) in MODELS.items():
        name = "%s-%s-py3-none-any.whl" % (dist.replace("-", "_"), WHEELS[dist])
        with zipfile.ZipFile(os.path.join(wheels, name)) as z, \
                z.open(inner) as src, open(paths[key], "wb") as dst:
            shutil.copyfileobj(src, dst)
    return checked(paths, "downloaded wheels")


def resolve_models(args):
    if args.models:
        return models_from_dir(args.models), "--models " + args.models
    paths, why = models_installed()
    if paths:
        return paths, "installed packages"
    if args.no_download:
        raise SetupError(why + "; scripts/setup.sh installs the pins of "
                         "tests/requirements-nodeps.txt (--models DIR: extracted files)")
    return models_downloaded(args.cache), "downloaded into " + args.cache


def default_cache():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tcinfer", "real_weights")


# ---------------------------------------------------------------- runners

class OrtRunner:
    name = "onnxruntime"

    def __init__(self, paths):
        import onnxruntime as ort
        self.ort, self.paths, self.sessions = ort, paths, {}

    def session(self, key, model=None):
        if key not in self.sessions:
            opts = self.ort.SessionOptions()
            opts.log_severity_level = 3
            self.sessions[key] = self.ort.InferenceSession(
                model if model is not None else self.paths[key], opts,
                providers=["CPUExecutionProvider"])
        return self.sessions[key]

    def run(self, key, feeds):
        return self.session(key).run(None, feeds)

    def det_logits(self, pages):
        """The detection model's probability map and its input logits (the last Sigmoid's
        input made an output too)."""
        import onnx
        if "det_logits" not in self.sessions:
            m = onnx.load(self.paths["det"])
            last = [n for n in m.graph.node if n.output[0] == m.graph.output[0].name]
            if len(last) != 1 or last[0].op_type != "Sigmoid":
                raise SetupError("the detection model does not end with a Sigmoid")
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(last[0].input[0]))
            self.session("det_logits", m.SerializeToString())
        return self.sessions["det_logits"].run(None, {"x": pages})


def graph_inputs(path):
    """The names of a model's inputs in the engine's order (graph inputs, initializers left out)."""
    import onnx
    g = onnx.load(path, load_external_data=False).graph
    init = {t.name for t in g.initializer}
    return [i.name for i in g.input if i.name not in init]


class TcinferRunner:
    """tcinfer through its Python binding (python/tcinfer): one engine per model and input
    shape, built on first use, so the VAD loop runs chunk after chunk on one engine."""

    def __init__(self, paths, backend, precision, timing_cache=None):
        import tcinfer
        self.tcinfer, self.paths = tcinfer, paths
        self.backend, self.precision, self.timing_cache = backend, precision, timing_cache
        self.name = "tcinfer %s" % ("cpu" if backend == "cpu" else "gpu " + precision)
        self.errors = (tcinfer.TcinferError,)
        self.engines = {}

    def run(self, key, feeds):
        shapes = {n: list(v.shape) for n, v in feeds.items()}
        ident = (key, tuple((n, tuple(s)) for n, s in sorted(shapes.items())))
        if ident not in self.engines:
            kw = {} if self.backend == "cpu" else {"precision": self.precision,
                                                   "timing_cache": self.timing_cache}
            if self.backend != "cpu" and "@" in self.precision:
                # auto@TOL: the precision search to that error, calibrated on these inputs
                target = float(self.precision.split("@", 1)[1])
                kw.update(precision="auto", accuracy_target=target,
                          calibration_inputs=[feeds[n] for n in graph_inputs(self.paths[key])])
            self.engines[ident] = self.tcinfer.Engine(self.paths[key], backend=self.backend,
                                                      shapes=shapes, **kw)
        return self.engines[ident].run(feeds)

    def close(self):
        for e in self.engines.values():
            e.close()
        self.engines.clear()


# ---------------------------------------------------------------- comparisons

def sigmoid64(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def levenshtein(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def iou(a, b):
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


# ---------------------------------------------------------------- OCR

def ocr_answers(runner, paths, pages, labels):
    """One backend's pipeline end to end: its boxes, classes, texts, and each model's output
    on the input it was given."""
    det = runner.run("det", {"x": ocr.normalize(pages)})[0]
    boxes, crops = [], []
    for p in range(len(pages)):
        for b in ocr.det_boxes(det[p, 0]):
            boxes.append((p, b))
            crops.append(ocr.crop(pages[p], b))
    if not crops:
        return {"det": det, "boxes": [], "classes": [], "texts": [], "crops": []}
    cls_in = ocr.cls_input(crops)
    cls_out = runner.run("cls", {"x": cls_in})[0]
    classes = ocr.cls_classes(cls_out)
    upright = [np.ascontiguousarray(np.rot90(c, 2)) if k == 180 else c
               for c, k in zip(crops, classes)]
    rec_in = ocr.rec_input(upright)
    rec_out = runner.run("rec", {"x": rec_in})[0]
    return {"det": det, "boxes": boxes, "classes": classes, "texts": ocr.ctc_greedy(rec_out, labels),
            "cls_in": cls_in, "cls_out": cls_out, "rec_in": rec_in, "rec_out": rec_out}


def match_boxes(ref, got):
    """For each reference box, (index in got of the best IoU on the same page, IoU)."""
    out = []
    for p, b in ref:
        best = max(((iou(b, g), j) for j, (q, g) in enumerate(got) if q == p), default=(0.0, -1))
        out.append((best[1], best[0]))
    return out


def read_accuracy(answers, truth):
    """onnxruntime's reading of the rendered lines: character accuracy (1 - edit distance /
    characters; also with the spaces left out of both, which the recognizer, trained mostly on
    Chinese, often drops), lines read exactly, lines not found (no box of IoU >= 0.3 on the
    line)."""
    errors = chars = exact = missed = errors_ns = chars_ns = 0
    wrong = []
    for p, box, text, _ in truth:
        best = max(((iou(box, b), j) for j, (q, b) in enumerate(answers["boxes"]) if q == p),
                   default=(0.0, -1))
        read = answers["texts"][best[1]] if best[0] >= 0.3 else ""
        missed += best[0] < 0.3
        e = levenshtein(text, read)
        errors, chars, exact = errors + e, chars + len(text), exact + (e == 0)
        errors_ns += levenshtein(text.replace(" ", ""), read.replace(" ", ""))
        chars_ns += len(text.replace(" ", ""))
        if e:
            wrong.append("%r read %r" % (text, read))
    return {"char_accuracy": 1.0 - errors / max(1, chars),
            "char_accuracy_without_spaces": 1.0 - errors_ns / max(1, chars_ns), "lines": len(truth),
            "exact_lines": exact, "missed_lines": missed, "misread": wrong}


def ocr_compare(ref, got):
    """got's answers against ref's: boxes matched one to one at IoU >= BOX_IOU, the same
    classes and texts on matched boxes."""
    pairs = match_boxes(ref["boxes"], got["boxes"])
    used = [j for j, v in pairs if v >= BOX_IOU]
    box_ok = (len(ref["boxes"]) == len(got["boxes"]) and len(used) == len(pairs)
              and len(set(used)) == len(used))
    diffs = []
    same_cls = same_text = 0
    for i, (j, v) in enumerate(pairs):
        if v < BOX_IOU:
            diffs.append("box %s: best IoU %.3f" % (ref["boxes"][i], v))
            continue
        if ref["classes"][i] == got["classes"][j]:
            same_cls += 1
        else:
            diffs.append("box %s: class %d, reference %d" % (ref["boxes"][i], got["classes"][j],
                                                              ref["classes"][i]))
        if ref["texts"][i] == got["texts"][j]:
            same_text += 1
        else:
            diffs.append("box %s: %r, reference %r" % (ref["boxes"][i], got["texts"][j],
                                                        ref["texts"][i]))
    return {"boxes": len(got["boxes"]), "ref_boxes": len(ref["boxes"]),
            "matched": len(set(used)),
            "min_iou": min([v for _, v in pairs], default=1.0), "same_boxes": box_ok,
            "same_classes": same_cls, "same_texts": same_text, "differences": diffs,
            "ok": box_ok and same_cls == len(pairs) and same_text == len(pairs)}


def ocr_task(ort_runner, runners, paths, seed, pages_n):
    pages, truth = ocr.render_pages(seed, pages_n)
    labels = ocr.dictionary(paths["rec"])
    ref = ocr_answers(ort_runner, paths, pages, labels)
    ort_prob, logits = ort_runner.det_logits(ocr.normalize(pages))
    prob64 = sigmoid64(logits)
    result = {"pages": pages_n, "lines": len(truth),
              "upside_down": sum(1 for t in truth if t[3]),
              "onnxruntime": dict(read_accuracy(ref, truth), boxes=len(ref["boxes"]),
                                  turned=sum(1 for k in ref["classes"] if k == 180),
                                  det_rel_l2_fp64=rel_l2(ort_prob, prob64)),
              "backends": {}}
    for r in runners:
        try:
            result["backends"][r.name] = ocr_backend(r, paths, pages, labels, ref, prob64)
        except r.errors as e:  # a build or run failure is this backend's answer
            result["backends"][r.name] = {"error": str(e)}
    result["onnxruntime"]["texts"] = ref["texts"]
    return result


def ocr_backend(r, paths, pages, labels, ref, prob64):
    got = ocr_answers(r, paths, pages, labels)
    models = {"det": {"rel_l2": rel_l2(got["det"], ref["det"]),
                      "rel_l2_fp64": rel_l2(got["det"], prob64)}}
    # cls and rec on onnxruntime's crops: the same input for both runtimes
    for key in ("cls", "rec"):
        if ref.get(key + "_in") is None:
            continue
        same_in = got.get(key + "_in") is not None and \
            got[key + "_in"].shape == ref[key + "_in"].shape and \
            np.array_equal(got[key + "_in"], ref[key + "_in"])
        out = got[key + "_out"] if same_in else r.run(key, {"x": ref[key + "_in"]})[0]
        models[key] = {"rel_l2": rel_l2(out, ref[key + "_out"])}
    return {"models": models, "answers": ocr_compare(ref, got), "texts": got["texts"]}


# ---------------------------------------------------------------- VAD

VAD_RATE, VAD_CHUNK, VAD_CONTEXT = 16000, 512, 64
# (kind, seconds): voiced segments carry the vowels' formants (F1, F2, F3 in Hz)
VAD_SCRIPT = [("quiet", 0.6), ("voiced", 1.2), ("quiet", 0.5), ("noise", 0.6), ("voiced", 1.0),
              ("quiet", 0.6), ("voiced", 0.8), ("quiet", 0.5)]
VOWELS = [(730, 1090, 2440), (270, 2290, 3010), (300, 870, 2240), (530, 1840, 2480),
          (570, 840, 2410)]


def vad_signal(seed):
    """A deterministic speech-like signal: quiet room noise, broadband noise bursts, and voiced
    segments (a gliding, vibrato fundamental of 100-220 Hz, its harmonics shaped by three
    formant resonances that change every syllable, under a 4-5 Hz syllable envelope)."""
    rng = np.random.default_rng(seed)
    parts = []
    for kind, seconds in VAD_SCRIPT:
        n = int(seconds * VAD_RATE)
        t = np.arange(n) / VAD_RATE
        x = 0.003 * rng.standard_normal(n)
        if kind == "noise":
            x += 0.08 * rng.standard_normal(n)
        elif kind == "voiced":
            f_start, f_end = rng.uniform(100, 220, 2)
            f0 = np.linspace(f_start, f_end, n) * (1 + 0.02 * np.sin(2 * np.pi * 5.5 * t))
            phase = 2 * np.pi * np.cumsum(f0) / VAD_RATE
            syllable = rng.uniform(4.0, 5.0)
            which = (t * syllable).astype(int)
            formants = np.array([VOWELS[i] for i in rng.integers(len(VOWELS), size=which.max() + 1)])
            f = formants[which]                                  # [n, 3]
            voiced = np.zeros(n)
            for k in range(1, int(4000 / 100) + 1):
                fk = k * f0
                gain = sum(1.0 / (1.0 + ((fk - f[:, i]) / (60.0 + 40 * i)) ** 2) for i in range(3))
                voiced += np.where(fk < 4000, gain / k, 0.0) * np.sin(k * phase)
            envelope = np.sin(np.pi * (t * syllable % 1.0)) ** 2
            x += 0.25 * voiced * envelope / np.abs(voiced).max()
        parts.append(x)
    return np.concatenate(parts).astype(np.float32)


def vad_probabilities(runner, signal):
    """The model's own streaming interface: each call takes the last 64 samples of the previous
    call's input followed by the next 512, and the state the previous call returned."""
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros(VAD_CONTEXT, np.float32)
    probs = []
    for start in range(0, len(signal) - VAD_CHUNK + 1, VAD_CHUNK):
        x = np.concatenate([context, signal[start:start + VAD_CHUNK]])[None]
        out, state = runner.run("vad", {"input": x, "state": state})
        probs.append(float(np.asarray(out).reshape(-1)[0]))
        context = x[0, -VAD_CONTEXT:]
    return np.array(probs)


def vad_task(ort_runner, runners, seed):
    signal = vad_signal(seed)
    ref = vad_probabilities(ort_runner, signal)
    kinds = np.concatenate([[k] * int(s * VAD_RATE) for k, s in VAD_SCRIPT])
    chunk_kind = kinds[np.arange(len(ref)) * VAD_CHUNK + VAD_CHUNK // 2]
    by_kind = {k: "%d/%d" % (int((ref[chunk_kind == k] >= 0.5).sum()), int((chunk_kind == k).sum()))
               for k in ("voiced", "quiet", "noise")}
    result = {"seconds": len(signal) / VAD_RATE, "chunks": len(ref),
              "onnxruntime": {"speech_chunks": int((ref >= 0.5).sum()), "speech_by_segment": by_kind,
                              "nearest_to_threshold": float(np.abs(ref - 0.5).min())},
              "backends": {}}
    for r in runners:
        try:
            got = vad_probabilities(r, signal)
        except r.errors as e:
            result["backends"][r.name] = {"error": str(e)}
            continue
        flips = np.flatnonzero((got >= 0.5) != (ref >= 0.5))
        result["backends"][r.name] = {"max_abs": float(np.abs(got - ref).max()),
                                      "rel_l2": rel_l2(got, ref),
                                      "decisions_differ": [int(i) for i in flips],
                                      "ok": len(flips) == 0}
    return result


# ---------------------------------------------------------------- checks and report

def checks(result, cpu):
    """[(what, ok)]: onnxruntime's own reading (the pipeline works), then per backend the same
    answers, and on the CPU reference the per-model error bounds."""
    o, v = result["ocr"], result["vad"]
    ort = o["onnxruntime"]
    out = [("onnxruntime reads the rendered text: character accuracy %.3f >= %.2f, %d of %d "
            "lines found" % (ort["char_accuracy"], MIN_ORT_CHAR_ACCURACY,
                             ort["lines"] - ort["missed_lines"], ort["lines"]),
            ort["char_accuracy"] >= MIN_ORT_CHAR_ACCURACY and ort["missed_lines"] == 0),
           ("onnxruntime turns the %d upside-down lines (turned %d)"
            % (o["upside_down"], ort["turned"]), ort["turned"] == o["upside_down"]),
           ("onnxruntime's VAD decisions hold both classes (%d of %d chunks speech)"
            % (v["onnxruntime"]["speech_chunks"], v["chunks"]),
            0 < v["onnxruntime"]["speech_chunks"] < v["chunks"])]
    for name, b in o["backends"].items():
        vb = v["backends"][name]
        errors = ["%s: %s" % (task, x["error"]) for task, x in (("OCR", b), ("VAD", vb))
                  if "error" in x]
        if errors:
            out += [("%s: %s" % (name, e), False) for e in errors]
            continue
        a = b["answers"]
        out.append(("%s: OCR answers as onnxruntime's (%d/%d boxes at IoU >= %g, %d classes, "
                    "%d texts)%s" % (name, a["boxes"], a["ref_boxes"], BOX_IOU, a["same_classes"],
                                     a["same_texts"], "" if a["ok"] else ": " +
                                     "; ".join(a["differences"][:4])), a["ok"]))
        out.append(("%s: VAD decisions at 0.5 as onnxruntime's%s" % (
            name, "" if vb["ok"] else " (chunks %s differ)" % vb["decisions_differ"][:10]),
            vb["ok"]))
        if not cpu:
            continue
        for key, m in b["models"].items():
            if m["rel_l2"] <= CPU_REL_L2:
                out.append(("%s: %s rel L2 %.3g <= %g" % (name, key, m["rel_l2"], CPU_REL_L2),
                            True))
            elif "rel_l2_fp64" in m:
                bound = CPU_FP64_MARGIN * ort["det_rel_l2_fp64"]
                out.append(("%s: %s rel L2 against float64 %.3g <= %.3g (%g x onnxruntime's "
                            "%.3g)" % (name, key, m["rel_l2_fp64"], bound, CPU_FP64_MARGIN,
                                       ort["det_rel_l2_fp64"]), m["rel_l2_fp64"] <= bound))
            else:
                out.append(("%s: %s rel L2 %.3g <= %g" % (name, key, m["rel_l2"], CPU_REL_L2),
                            False))
        out.append(("%s: VAD probabilities max abs diff %.3g <= %g"
                    % (name, vb["max_abs"], CPU_VAD_ABS), vb["max_abs"] <= CPU_VAD_ABS))
    return out


def report(result):
    o, v = result["ocr"], result["vad"]
    ort = o["onnxruntime"]
    lines = ["OCR: %d pages, %d lines (%d upside down); onnxruntime finds %d boxes, reads %d "
             "lines exactly, character accuracy %.4f (%.4f without spaces); its detection "
             "sigmoid against float64: rel L2 %.3g"
             % (o["pages"], o["lines"], o["upside_down"], ort["boxes"], ort["exact_lines"],
                ort["char_accuracy"], ort["char_accuracy_without_spaces"],
                ort["det_rel_l2_fp64"]),
             "VAD: %.1f s, %d chunks of %d samples; onnxruntime: %d speech (voiced segments %s, "
             "quiet %s, noise %s), nearest to 0.5 by %.3g"
             % (v["seconds"], v["chunks"], VAD_CHUNK, v["onnxruntime"]["speech_chunks"],
                v["onnxruntime"]["speech_by_segment"]["voiced"],
                v["onnxruntime"]["speech_by_segment"]["quiet"],
                v["onnxruntime"]["speech_by_segment"]["noise"],
                v["onnxruntime"]["nearest_to_threshold"]), ""]
    rows = []
    for name, b in o["backends"].items():
        vb = v["backends"][name]
        if "error" in b or "error" in vb:
            rows.append([name] + ["error"] * 8)
            continue
        m, a = b["models"], b["answers"]
        rows.append([name, "%.3g (float64: %.3g)" % (m["det"]["rel_l2"], m["det"]["rel_l2_fp64"]),
                     "%.3g" % m["cls"]["rel_l2"] if "cls" in m else "-",
                     "%.3g" % m["rec"]["rel_l2"] if "rec" in m else "-",
                     "%d/%d (%d found), min IoU %.3f" % (a["matched"], a["ref_boxes"],
                                                         a["boxes"], a["min_iou"]),
                     "%d/%d" % (a["same_classes"], a["ref_boxes"]),
                     "%d/%d" % (a["same_texts"], a["ref_boxes"]),
                     "%.3g" % vb["max_abs"],
                     "%d/%d" % (v["chunks"] - len(vb["decisions_differ"]), v["chunks"])])
    lines.append(markdown_table(
        ["backend", "det rel L2", "cls rel L2", "rec rel L2", "boxes", "same class",
         "same text", "VAD max abs", "same VAD decision"], rows))
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", metavar="DIR", help="the model files (as --extract writes them)")
    p.add_argument("--cache", metavar="DIR", default=default_cache(),
                   help="where the pinned wheels are downloaded and unpacked (default %(default)s)")
    p.add_argument("--no-download", action="store_true",
                   help="fail rather than download when the pinned packages are not installed")
    p.add_argument("--extract", metavar="DIR",
                   help="copy the model files into DIR (for a machine without network), then exit")
    p.add_argument("--backend", choices=("cpu", "gpu"), default="cpu",
                   help="tcinfer's backend (default cpu: the fp32 reference)")
    p.add_argument("--precision", default="fp16",
                   help="GPU: comma-separated precisions, each a run (fp16, bf16, auto, tf32, fp32; "
                        "auto@TOL: --precision auto with --accuracy-target TOL, calibrated on the "
                        "task's inputs)")
    p.add_argument("--timing-cache", metavar="FILE",
                   help="GPU: the engines' shared timing cache (tcinfer --timing-cache)")
    p.add_argument("--library", metavar="PATH",
                   help="libtcinfer.so to load (default: $TCINFER_LIBRARY, then the binding's search)")
    p.add_argument("--pages", type=int, default=2, help="OCR pages of %d lines (default 2)"
                   % ocr.LINES_PER_PAGE)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    args = p.parse_args(argv)
    precisions = [s for s in args.precision.split(",") if s]
    def known(s):
        if s.startswith("auto@"):
            try:
                return float(s[5:]) > 0
            except ValueError:
                return False
        return s in ("fp16", "bf16", "auto", "tf32", "fp32")
    bad = [s for s in precisions if not known(s)]
    if bad or not precisions:
        p.error("--precision: %s is not one of fp16, bf16, auto, auto@TOL (the search to a "
                "relative L2 error TOL on the task's own inputs), tf32, fp32" % (bad or ["''"])[0])
    if args.backend == "cpu" and (args.precision != "fp16" or args.timing_cache):
        p.error("--precision and --timing-cache are for --backend gpu (the CPU reference is fp32)")
    if args.pages < 1:
        p.error("--pages must be at least 1")
    args.precisions = precisions
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        paths, source = resolve_models(args)
    except SetupError as e:
        print("real_weights: %s" % e, file=sys.stderr)
        return 2
    if args.extract:
        os.makedirs(args.extract, exist_ok=True)
        for key, path in paths.items():
            dst = os.path.join(args.extract, os.path.basename(path))
            shutil.copyfile(path, dst)
            print("%-40s %9d bytes" % (dst, os.path.getsize(dst)))
        return 0
    try:
        import PIL
        pil = PIL.__version__
    except ImportError:
        pil = None
    if not pil or tuple(int(v) for v in pil.split(".")[:2]) < (10, 1):
        print("real_weights: %s has %s; the OCR pages are rendered with the built-in scalable font "
              "of Pillow >= 10.1 (tests/requirements.txt pins it)"
              % (sys.executable, "Pillow " + pil if pil else "no Pillow"), file=sys.stderr)
        return 2
    if args.library:
        os.environ["TCINFER_LIBRARY"] = args.library
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    print("models: %s" % source, flush=True)
    ort_runner = OrtRunner(paths)
    backend = args.backend
    runners = [TcinferRunner(paths, backend, p, args.timing_cache)
               for p in (["fp32"] if backend == "cpu" else args.precisions)]
    result = {"models": {k: os.path.basename(p) for k, p in paths.items()},
              "wheels": WHEELS, "seed": args.seed, "backend": backend}
    result["ocr"] = ocr_task(ort_runner, runners, paths, args.seed, args.pages)
    result["vad"] = vad_task(ort_runner, runners, args.seed)
    for r in runners:
        r.close()
    result["checks"] = [{"check": c, "ok": ok} for c, ok in checks(result, backend == "cpu")]
    print(report(result))
    print()
    for c in result["checks"]:
        print("%s  %s" % ("PASS" if c["ok"] else "FAIL", c["check"]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0 if all(c["ok"] for c in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())

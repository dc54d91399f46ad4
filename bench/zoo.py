#!/usr/bin/env python3
"""The model zoo sweep: public architectures exported to ONNX and run through tcinfer.

Runs on the GPU machine (PyTorch with torchvision, timm and transformers; onnxruntime on the
CPU). Random weights (seed 0; zero-initialised weight matrices filled; BatchNorm statistics
measured on random inputs so activations keep a trained network's scale). For each model, one
row:

- the exporter and opset;
- tcinfer's CPU reference against onnxruntime on the same inputs (relative L2 <= 1e-5 per
  float output, integer outputs equal);
- tcinfer's GPU fp16 engine against PyTorch fp32 (TF32 off) on the same inputs, next to
  PyTorch fp16's own error against the same reference: no worse (within GPU_ERROR_MARGIN, the
  spread between two correct fp16 engines on 4 inputs) is a pass; classifiers must
  also give the same top-1 on every row. Where the fp16 engine overflows (NaN/Inf that the
  fp32 reference does not hold), the product's answer is `--precision auto`: the run is
  repeated with it (the same inputs as its calibration inputs) and its result is the row's,
  marked "auto: N layers fp32";
- batch-1 latency and batch-64 throughput of tcinfer and of PyTorch fp16 (CUDA graph replay).

An error names what stopped the model (the op, for tcinfer); a wrong result is a failed row.
Results go to a JSON file per model (so a sweep can run in parts, --part I/N) and
--report renders every JSON file found into one markdown table (docs/zoo.md).
"""

import argparse
import concurrent.futures
import datetime
import glob
import json
import os
import re
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_models import (fmt_ms, markdown_table, parse_bench,  # noqa: E402
                          resolve_binary, run_tcinfer)
from model_export import (error_text, export_onnx, make_inputs,  # noqa: E402
                          image_inputs as _image_inputs, text_inputs as _text_inputs,
                          transformers_model as _transformers_model,
                          tuple_outputs as _tuple_outputs)

ACC_BATCH = 4          # rows of the accuracy comparison
BENCH_BATCHES = (1, 64)
CPU_REL_L2 = 1e-5      # tcinfer CPU reference vs onnxruntime
# GPU: tcinfer's error against PyTorch fp32 may exceed PyTorch fp16's by this factor. Two correct
# fp16 engines round in different places; on 4 inputs their errors differ by a few per cent
# either way (ConvNeXt-T: 8.26e-4 against 8.11e-4), which is not a worse engine.
GPU_ERROR_MARGIN = 1.1
# CPU: past CPU_REL_L2, both runtimes are measured against PyTorch in fp64. Deep random-weight
# networks (ResNet-152, RegNets, Inception) amplify fp32 rounding so far that onnxruntime itself
# lies 1e-5 to 5e-4 from fp64: there the row passes when tcinfer lies no further from fp64 than
# onnxruntime, within this factor for the spread between two correct fp32 engines (1.06x to 1.11x
# measured the other way round on the H200, 2026-12-01).
CPU_FP64_MARGIN = 1.25
# --precision auto builds an engine a round (up to 16 rounds, and an fp32 one): its runs get
# this many times --timeout, and a timing cache shared by the rounds
AUTO_TIMEOUT_FACTOR = 4
CALIBRATION_BATCHES = 2

# ---------------------------------------------------------------- the models

TIMM = [
    # classic and modern CNNs
    "resnet18", "resnet50d", "resnext50_32x4d", "seresnext26d_32x4d", "wide_resnet50_2",
    "densenet121", "dpn68", "dla34", "vgg11_bn", "inception_v3", "inception_v4", "xception41",
    "regnetx_002", "regnety_008", "res2net50_26w_4s", "resnest14d", "cspresnet50", "cspdarknet53",
    "darknet53", "hrnet_w18_small", "efficientnet_b0", "efficientnetv2_rw_t", "tf_efficientnet_lite0",
    "convnext_tiny", "convnextv2_atto", "nfnet_l0", "dm_nfnet_f0", "nf_resnet26",
    # mobile nets
    "mobilenetv2_100", "mobilenetv3_large_100", "mobilenetv4_conv_small", "mnasnet_100",
    "ghostnet_100", "lcnet_050", "fbnetc_100", "tinynet_a", "efficientvit_b0",
    # re-parameterised
    "repvgg_a0", "mobileone_s0", "fastvit_t8", "repghostnet_050",
    # vision transformers and hybrids
    "vit_tiny_patch16_224", "deit_tiny_patch16_224", "swin_tiny_patch4_window7_224",
    "levit_128s", "coat_lite_tiny", "pvt_v2_b0", "mobilevit_xxs", "edgenext_xx_small",
    "poolformer_s12", "convit_tiny", "crossvit_tiny_240", "twins_svt_small", "cait_xxs24_224",
    "efficientformer_l1", "tiny_vit_5m_224", "maxvit_nano_rw_256",
    # MLP mixers
    "mixer_b16_224", "resmlp_12_224", "gmlp_ti16_224",
]


class Spec:
    """One model of the sweep: how to build it and its inputs."""

    def __init__(self, name, family, build, classifier=False):
        self.name, self.family, self.build, self.classifier = name, family, build, classifier


def _torchvision_classifier(name):
    def build(torch):
        import torchvision
        kw = {"aux_logits": False, "init_weights": True} if name in ("googlenet", "inception_v3") else {}
        model = getattr(torchvision.models, name)(weights=None, **kw)
        size = 299 if name == "inception_v3" else 224
        return model, _image_inputs(torch, (3, size, size)), {}
    return build


def _timm_model(name):
    def build(torch):
        import timm
        model = timm.create_model(name, pretrained=False)
        shape = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
        return model, _image_inputs(torch, shape), {}
    return build


def _torchvision_segmentation(name):
    def build(torch):
        import torchvision
        model = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)
        return model, _image_inputs(torch, (3, 520, 520)), {}
    return build


def _torchvision_detection_heads(name, size):
    """Backbone (with FPN) and heads, up to the box decoding and NMS: their outputs are the
    raw regression and classification maps."""
    def build(torch):
        import torchvision

        det = getattr(torchvision.models.detection, name)(weights=None, weights_backbone=None)

        class Heads(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.backbone, self.head = det.backbone, det.head

            def forward(self, x):
                feats = self.backbone(x)
                feats = list(feats.values()) if isinstance(feats, dict) else [feats]
                return self.head(feats)

        return Heads(), _image_inputs(torch, (3, size, size)), {}
    return build


def _yolo_like(torch):
    """A YOLOv8-style anchor-free detector: conv backbone, three strides, and the decoding whose
    grid is computed in the graph from the feature maps' shapes (Shape, Gather, Range, ...)."""
    nn = torch.nn

    def block(ci, co, s):
        return nn.Sequential(nn.Conv2d(ci, co, 3, s, 1, bias=False), nn.BatchNorm2d(co), nn.SiLU())

    class Yolo(nn.Module):
        def __init__(self, nc=80, reg=16):
            super().__init__()
            self.nc, self.reg = nc, reg
            self.stem = nn.Sequential(block(3, 16, 2), block(16, 32, 2), block(32, 32, 1))
            self.p3 = nn.Sequential(block(32, 64, 2), block(64, 64, 1))
            self.p4 = nn.Sequential(block(64, 128, 2), block(128, 128, 1))
            self.p5 = nn.Sequential(block(128, 256, 2), block(256, 256, 1))
            self.heads = nn.ModuleList(nn.Sequential(block(c, 64, 1), nn.Conv2d(64, 4 * reg + nc, 1))
                                       for c in (64, 128, 256))
            self.register_buffer("proj", torch.arange(reg, dtype=torch.float32))

        def forward(self, x):
            x = self.stem(x)
            f3 = self.p3(x)
            f4 = self.p4(f3)
            f5 = self.p5(f4)
            boxes, scores = [], []
            for f, head, stride in zip((f3, f4, f5), self.heads, (8, 16, 32)):
                y = head(f)
                b, _, h, w = y.shape
                sy = torch.arange(h, dtype=torch.float32, device=y.device) + 0.5
                sx = torch.arange(w, dtype=torch.float32, device=y.device) + 0.5
                gy, gx = torch.meshgrid(sy, sx, indexing="ij")
                anchors = torch.stack((gx, gy), -1).view(1, h * w, 2)
                y = y.view(b, 4 * self.reg + self.nc, h * w).permute(0, 2, 1)
                dist = y[..., :4 * self.reg].reshape(b, h * w, 4, self.reg).softmax(-1) @ self.proj
                lt, rb = dist[..., :2], dist[..., 2:]
                xy = (anchors + (rb - lt) / 2) * stride
                wh = (lt + rb) * stride
                boxes.append(torch.cat((xy, wh), -1))
                scores.append(y[..., 4 * self.reg:].sigmoid())
            return torch.cat(boxes, 1), torch.cat(scores, 1)

    return Yolo(), _image_inputs(torch, (3, 640, 640)), {"dynamic_hw": True}


def _crnn(torch):
    """A CRNN text recogniser: conv features, a two-layer bidirectional LSTM, per-column
    classes (CTC)."""
    nn = torch.nn

    class Crnn(nn.Module):
        def __init__(self, classes=37):
            super().__init__()
            c = [1, 64, 128, 256, 256]
            layers = []
            for i in range(4):
                layers += [nn.Conv2d(c[i], c[i + 1], 3, 1, 1), nn.BatchNorm2d(c[i + 1]), nn.ReLU()]
                layers.append(nn.MaxPool2d((2, 2) if i < 2 else (2, 1)))
            self.cnn = nn.Sequential(*layers)
            self.rnn = nn.LSTM(256 * 2, 128, num_layers=2, bidirectional=True, batch_first=False)
            self.fc = nn.Linear(256, classes)

        def forward(self, x):
            f = self.cnn(x)  # N, 256, 2, W/4
            n, c, h, w = f.shape
            f = f.reshape(n, c * h, w).permute(2, 0, 1)  # T, N, C
            y, _ = self.rnn(f)
            return self.fc(y).log_softmax(-1)

    return Crnn(), _image_inputs(torch, (1, 32, 128)), {}


def _gru_tagger(torch):
    """A GRU sequence model (reverse-direction GRU over embedded tokens)."""
    nn = torch.nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(1000, 128)
            self.gru = nn.GRU(128, 256, num_layers=1, bidirectional=True, batch_first=True)
            self.out = nn.Linear(512, 20)

        def forward(self, input_ids, attention_mask):
            y, _ = self.gru(self.emb(input_ids))
            return self.out(y)

    return Tagger(), _text_inputs(torch, 1000), {}


def all_specs():
    import torchvision
    specs = []
    for name in sorted(torchvision.models.list_models(module=torchvision.models)):
        specs.append(Spec("tv/" + name, "torchvision classification",
                          _torchvision_classifier(name), True))
    for name in TIMM:
        specs.append(Spec("timm/" + name, "timm", _timm_model(name), True))
    for name in ("fcn_resnet50", "deeplabv3_resnet50", "deeplabv3_mobilenet_v3_large",
                 "lraspp_mobilenet_v3_large"):
        specs.append(Spec("tv-seg/" + name, "torchvision segmentation",
                          _torchvision_segmentation(name)))
    for name, size in (("ssdlite320_mobilenet_v3_large", 320), ("retinanet_resnet50_fpn", 512),
                       ("fcos_resnet50_fpn", 512), ("ssd300_vgg16", 300)):
        specs.append(Spec("tv-det/" + name, "torchvision detection (backbone + heads)",
                          _torchvision_detection_heads(name, size)))
    for kind in ("bert", "distilbert", "roberta", "gpt2"):
        specs.append(Spec("hf/" + kind, "transformers text", _transformers_model(kind)))
    specs.append(Spec("hf/vit", "transformers vision", _transformers_model("vit"), True))
    specs.append(Spec("hf/wav2vec2", "transformers audio encoder", _transformers_model("wav2vec2")))
    specs.append(Spec("custom/yolo", "YOLO-style detector with shape subgraph", _yolo_like))
    specs.append(Spec("custom/crnn", "CRNN (conv + bidirectional LSTM)", _crnn))
    specs.append(Spec("custom/gru_tagger", "GRU sequence model", _gru_tagger))
    return specs


# ---------------------------------------------------------------- export

def calibrate(torch, model, desc):
    """Measures BatchNorm statistics on random inputs, as training would have set them."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    model.eval()
    for m in norms:
        m.train()
        m.reset_running_stats()
        m.momentum = None
    with torch.no_grad():
        for i in range(CALIBRATION_BATCHES):
            model(*make_inputs(torch, desc, 4, 100 + i).values())
    model.eval()


def no_zero_weights(torch, model):
    """Gives random values (normal, std 0.02, seeded) to every weight matrix or kernel that
    its initialiser left all zeros: torchvision's ViTs and timm's MLP mixers zero their
    classifier head, so every output would be 0 and no comparison could fail. Returns how many
    were filled."""
    filled = 0
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and not p.any():
                p.normal_(0.0, 0.02)
                filled += 1
    return filled


def slug(name):
    return name.replace("/", "__")


def export_one(spec_name, out_dir, binary=None, timeout=300.0, cpu_batch=ACC_BATCH, plan=False):
    """In a worker process: builds, calibrates and exports one model, then (with binary) runs
    the CPU check on cpu_batch rows and (plan) builds the GPU plan, which need no GPU, so that
    they run in parallel too. Returns a dict."""
    import torch
    torch.set_num_threads(2)
    torch.manual_seed(0)
    # torchvision's ViT would take PyTorch's fused attention fast path in eval mode, which no
    # ONNX exporter takes: export the plain attention ops
    torch.backends.mha.set_fastpath_enabled(False)
    spec = {s.name: s for s in all_specs()}[spec_name]
    t0 = time.time()
    path = os.path.join(out_dir, slug(spec_name) + ".onnx")
    if binary is None and os.path.exists(path + ".pt"):
        # a timing run after an accuracy run in the same folder: the export stands
        return {"name": spec_name, "onnx": path, "export_s": 0.0}
    info = {"name": spec_name, "family": spec.family, "classifier": spec.classifier,
            "onnx": path}
    try:
        model, desc, opts = spec.build(torch)
        model.eval()
        info["zero_weights_filled"] = no_zero_weights(torch, model)
        calibrate(torch, model, desc)
        model = _tuple_outputs(torch, model)
        x = make_inputs(torch, desc, 2, 0)
        names = list(x.keys())
        with torch.no_grad():
            outs = model(*x.values())
        out_names = ["output_%d" % i for i in range(len(outs))]
        dyn = {n: {0: "batch"} for n in names}
        if opts.get("dynamic_hw"):
            dyn["input"] = {0: "batch", 2: "height", 3: "width"}
        info["inputs"] = {n: [k, list(shape), vocab] for n, (k, shape, vocab) in desc.items()}
        info["outputs"] = out_names
        how, note = export_onnx(torch, model, tuple(x.values()), path, names, out_names, dyn)
        if note:
            info["export_note"] = note
        info["exporter"] = how
        info["torch"] = torch.__version__
        info["params_m"] = sum(p.numel() for p in model.parameters()) / 1e6
        torch.save(model.state_dict(), path + ".pt")
    except Exception as e:
        info["error"] = "export: " + error_text(e)
        info["traceback"] = traceback.format_exc()[-2000:]
    info["export_s"] = round(time.time() - t0, 1)
    if binary and "error" not in info:
        info["cpu_batch"] = cpu_batch
        cpu_check(torch, info, out_dir, binary, timeout, model)
        if plan:
            plan_check(torch, info, out_dir, binary, timeout)
    return info


def accuracy_inputs(torch, info, work, batch=ACC_BATCH):
    """batch seeded inputs of info's model: torch tensors, and the tcinfer arguments for the
    inputs its graph reads (the exporter drops inputs the graph never reads, e.g. a GRU
    tagger's attention mask)."""
    desc = {n: (k, tuple(shape), vocab) for n, (k, shape, vocab) in info["inputs"].items()}
    x = make_inputs(torch, desc, batch, 0)
    read = info.get("graph_inputs", list(desc))
    xnp = {n: v.numpy() for n, v in x.items() if n in read}
    args, shapes = write_inputs(xnp, os.path.join(work, slug(info["name"])))
    return x, xnp, args, shapes


def cpu_check(torch, info, work, binary, timeout, model=None):
    """tcinfer's CPU reference against onnxruntime on the accuracy inputs. Past the bound, both
    are also measured against PyTorch in fp64 (model given): a deep random-weight network can
    amplify fp32 rounding past 1e-5 between two correct fp32 engines, and the fp64 errors tell
    that apart from a wrong op."""
    import onnxruntime as ort
    t0 = time.time()
    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 2
        sess = ort.InferenceSession(info["onnx"], so, providers=["CPUExecutionProvider"])
        info["graph_inputs"] = [i.name for i in sess.get_inputs()]
        _, xnp, args, shapes = accuracy_inputs(torch, info, work,
                                               info.get("cpu_batch", ACC_BATCH))
        ref = sess.run(None, xnp)
        got, err = tcinfer_outputs(binary, info["onnx"], "cpu", args, shapes,
                                   os.path.join(work, slug(info["name"]), "cpu"), timeout)
        if err:
            info["cpu"] = {"error": err}
        else:
            e, problem = compare_outputs(got, ref, CPU_REL_L2)
            info["cpu"] = {"rel_l2": e, "ok": problem is None, "problem": problem}
            if problem and model is not None and e != float("inf"):
                x, _, _, _ = accuracy_inputs(torch, info, work, info.get("cpu_batch", ACC_BATCH))
                with torch.no_grad():
                    outs = model.double()(*[v.double() if v.is_floating_point() else v
                                            for v in x.values()])
                r64 = [o.numpy() for o in outs]
                info["cpu"]["fp64"] = {"tcinfer": compare_outputs(got, r64, None)[0],
                                       "onnxruntime": compare_outputs(ref, r64, None)[0]}
                model.float()
    except Exception as exc:
        info["cpu"] = {"error": "onnxruntime: " + error_text(exc)}
    info["cpu_s"] = round(time.time() - t0, 1)


def plan_check(torch, info, work, binary, timeout):
    """Whether the GPU planner takes the model (`tcinfer --plan`, no GPU needed): every op has
    a GPU path for these shapes."""
    _, _, _, shapes = accuracy_inputs(torch, info, work, info.get("cpu_batch", ACC_BATCH))
    _, err = run_tcinfer(binary, [info["onnx"], "--plan"] + shapes, timeout)
    info["plan"] = {"error": err} if err else {"ok": True}


def replan(results_dir, work, binary, timeout):
    """Re-runs the GPU plan check of every result that has one, with this binary, on the ONNX
    files an earlier run left in work (no PyTorch needed): after a fix, the table follows."""
    for f in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        with open(f) as fh:
            info = json.load(fh)
        path = os.path.join(work, slug(info["name"]) + ".onnx")
        if "plan" not in info or not os.path.exists(path):
            continue
        info["onnx"] = path
        batch = info.get("cpu_batch", ACC_BATCH)
        shapes = []
        for n, (_, shape, _) in info["inputs"].items():
            if n in info.get("graph_inputs", info["inputs"]):
                shapes += ["--shape", "%s:%s" % (n, "x".join(str(d) for d in [batch] + shape))]
        _, err = run_tcinfer(binary, [info["onnx"], "--plan"] + shapes, timeout)
        info["plan"] = {"error": err} if err else {"ok": True}
        save_result(f, info)
        print("%-40s %s" % (info["name"], "plan builds" if not err else err), flush=True)


# ---------------------------------------------------------------- comparisons

def rel_l2(got, ref):
    import numpy as np
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return float("inf")
    n = np.linalg.norm(ref)
    d = np.linalg.norm(got - ref)
    if not np.isfinite(d):
        return float("inf")
    return float(d / n) if n > 0 else float(d)


def compare_outputs(got, ref, bound):
    """(worst rel L2 over float outputs, first problem or None)."""
    import numpy as np
    worst = 0.0
    if len(got) != len(ref):
        return float("inf"), "%d outputs, expected %d" % (len(got), len(ref))
    for i, (g, r) in enumerate(zip(got, ref)):
        g, r = np.asarray(g), np.asarray(r)
        if g.shape != r.shape:
            return float("inf"), "output %d shape %s, expected %s" % (i, g.shape, r.shape)
        if np.issubdtype(r.dtype, np.floating):
            if r.size and not r.any():
                # rel L2 against a zero reference is 0 for a zero answer: nothing was checked
                return float("inf"), "output %d of the reference is all zeros" % i
            e = rel_l2(g, r)
            worst = max(worst, e)
        elif not np.array_equal(g, r):
            return float("inf"), "output %d (%s) differs" % (i, r.dtype)
    if bound is not None and worst > bound:
        return worst, "rel L2 %.3g > %.3g" % (worst, bound)
    return worst, None


def write_inputs(x, folder):
    import numpy as np
    os.makedirs(folder, exist_ok=True)
    args, shapes = [], []
    for n, v in x.items():
        p = os.path.join(folder, n + ".npy")
        np.save(p, v)
        args.append("%s=%s" % (n, p))
        shapes += ["--shape", "%s:%s" % (n, "x".join(str(d) for d in v.shape))]
    return args, shapes


def tcinfer_outputs(binary, onnx_path, backend, input_args, shape_args, folder, timeout,
                    extra=(), doc=None):
    """The outputs of a run (extra: more arguments); doc, a dict, receives the --json
    document."""
    import numpy as np
    os.makedirs(folder, exist_ok=True)
    for f in glob.glob(os.path.join(folder, "*.npy")):
        os.remove(f)
    # --json names the file of every output (written as DIR/NAME.npy)
    args = [onnx_path, "--backend", backend, "--quiet", "--json", "--output-dir", folder] + \
        list(extra) + shape_args + input_args
    out, err = run_tcinfer(binary, args, timeout)
    if err:
        return None, err
    try:
        parsed = json.loads(out)
        files = [o["file"] for o in parsed["outputs"]]
    except (ValueError, KeyError, TypeError) as e:
        return None, "unreadable --json output (%s)" % e
    if doc is not None:
        doc.update(parsed)
    return [np.load(f) for f in files], None


def is_fp16_overflow(error):
    """Whether a tcinfer GPU run failed on fp16 overflow: NaN/Inf in its outputs where the fp32
    reference holds none (the CLI's message, which goes on with the first layer)."""
    return bool(error) and "where the fp32 reference holds none: fp16 overflow" in error


def auto_record(doc, error):
    """What a --precision auto run chose, from its --json document (or its error)."""
    if error:
        return {"error": error}
    auto = (doc or {}).get("precision_auto")
    if not auto:
        return {"error": "no precision_auto in the --json output"}
    return {"fp32_layers": auto.get("fp32_layers", []), "relative_l2": auto.get("relative_l2"),
            "seconds": auto.get("seconds")}


def auto_args(folder):
    """The arguments of a --precision auto run, its rounds sharing a timing cache."""
    return ["--precision", "auto", "--timing-cache", os.path.join(folder, "auto.timing")]


def auto_bench_args(info, gpu, timeout, extra):
    """(timeout, arguments) of a row's timing runs. A row that needed --precision auto is timed
    with its answer: the fp16 engine with the layers the accuracy phase's search kept in fp32
    (--fp32-layers, the engine that search built, without searching again), or a search of its
    own where those names cannot be listed."""
    auto = gpu.get("auto") if "error" not in gpu else None
    if not auto:
        return timeout, list(extra)
    layers = auto.get("fp32_layers") or []
    if layers and not any("," in n or "*" in n for n in layers):
        return timeout, list(extra) + ["--fp32-layers", ",".join(layers)]
    return auto_search_args(info, timeout, extra)


def auto_search_args(info, timeout, extra):
    """(timeout, arguments) of a timing run that searches its own fp32 layers, calibrated on
    the timing's input (tcinfer's --random)."""
    folder = os.path.join(os.path.dirname(info["onnx"]), slug(info["name"]))
    os.makedirs(folder, exist_ok=True)  # its timing cache's (a bench run in a new --work has none)
    return timeout * AUTO_TIMEOUT_FACTOR, list(extra) + auto_args(folder)


def tcinfer_bench(binary, onnx_path, shape_args, iters, timeout, extra=()):
    args = [onnx_path, "--backend", "gpu", "--random", "0", "--quiet", "--bench", str(iters),
            "--warmup", "10"] + list(extra) + shape_args
    out, err = run_tcinfer(binary, args, timeout)
    if err:
        return {"error": err}
    r = parse_bench(out)
    return r if r else {"error": "no bench line"}


def pytorch_run(torch, model, x, half):
    """Outputs on the GPU in fp32, or in fp16 (.half(); autocast where a model mixes dtypes
    that .half() breaks, e.g. LeViT's float attention-bias buffers)."""
    dev = "cuda"
    m = model.to(dev)
    xs = [v.to(dev) for v in x.values()]
    try:
        with torch.no_grad():
            if not half:
                outs = m(*xs)
            else:
                try:
                    outs = m.half()(*[v.half() if v.is_floating_point() else v for v in xs])
                except RuntimeError:
                    m.float()
                    with torch.autocast("cuda", dtype=torch.float16):
                        outs = m(*xs)
        return [o.float().cpu().numpy() if o.is_floating_point() else o.cpu().numpy()
                for o in outs]
    finally:
        model.float()


def pytorch_bench(torch, model, make, batch, iters):
    """fp16 CUDA graph replay: median ms."""
    m = model.to("cuda").half()
    xs = [v.to("cuda") for v in make(batch, 0).values()]
    xs = [v.half() if v.is_floating_point() else v for v in xs]
    try:
        with torch.inference_mode():
            try:
                m(*xs)
            except RuntimeError:  # dtypes .half() breaks: autocast, as pytorch_run
                m = model.float()
                xs = [v.float() if v.is_floating_point() else v for v in xs]
                auto = m

                def m(*args):
                    with torch.autocast("cuda", dtype=torch.float16):
                        return auto(*args)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    m(*xs)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            try:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    m(*xs)
                step = graph.replay
                how = "graph"
            except Exception:
                torch.cuda.synchronize()
                graph = None
                step = lambda: m(*xs)  # noqa: E731
                how = "eager (graph capture failed)"
            for _ in range(5):
                step()
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(iters)]
            for s, e in ev:
                s.record()
                step()
                e.record()
            torch.cuda.synchronize()
        return {"median_ms": statistics.median(s.elapsed_time(e) for s, e in ev), "how": how}
    finally:
        model.float()
        graph = None
        torch.cuda.empty_cache()


def sweep_one(torch, binary, info, work, timeout, iters, phases, extra=()):
    """Fills info with the GPU accuracy ("acc" in phases) and timing ("bench") results; the
    CPU check ran in the export worker. extra: more arguments of every GPU tcinfer run."""
    name = info["name"]
    spec = {s.name: s for s in all_specs()}[name]
    model, _, _ = spec.build(torch)
    model = _tuple_outputs(torch, model)
    model.load_state_dict(torch.load(info["onnx"] + ".pt"))
    model.eval()
    desc = {n: (k, tuple(shape), vocab) for n, (k, shape, vocab) in info["inputs"].items()}
    graph_inputs = set(info.get("graph_inputs", desc))

    def make(batch, seed):
        return make_inputs(torch, desc, batch, seed)

    if "acc" in phases:
        gpu_check(torch, binary, info, model, work, timeout, extra)
    if "bench" in phases:
        bench(torch, binary, info, model, make, desc, graph_inputs, timeout, iters, extra)
    del model
    torch.cuda.empty_cache()
    return info


def gpu_check(torch, binary, info, model, work, timeout, extra=()):
    """tcinfer's GPU fp16 engine against PyTorch fp32, next to PyTorch fp16's own error."""
    import numpy as np
    folder = os.path.join(work, slug(info["name"]))
    t0 = time.time()
    try:
        x, _, input_args, shape_args = accuracy_inputs(torch, info, work)
        ref32 = pytorch_run(torch, model, x, half=False)
        pt16 = pytorch_run(torch, model, x, half=True)
        pt_err = compare_outputs(pt16, ref32, None)[0]
        got, err = tcinfer_outputs(binary, info["onnx"], "gpu", input_args, shape_args,
                                   os.path.join(folder, "gpu"), timeout, extra)
        auto = None
        if is_fp16_overflow(err):
            # the product's answer to an overflow: --precision auto, the same inputs calibrating
            doc = {}
            got, auto_err = tcinfer_outputs(binary, info["onnx"], "gpu", input_args, shape_args,
                                            os.path.join(folder, "gpu_auto"),
                                            timeout * AUTO_TIMEOUT_FACTOR,
                                            list(extra) + auto_args(folder), doc)
            auto = dict(auto_record(doc, auto_err), fp16_error=err)
            err = auto_err and "fp16 overflow; --precision auto: " + auto_err
        if err:
            info["gpu"] = {"error": err, "pytorch_fp16_rel_l2": pt_err}
            if auto:
                info["gpu"]["auto"] = auto
        else:
            e, problem = compare_outputs(got, ref32, None)
            g = {"rel_l2": e, "pytorch_fp16_rel_l2": pt_err}
            if auto:
                g["auto"] = auto
            if info["classifier"] and problem is None:
                t1 = int((np.asarray(got[0]).argmax(-1) == ref32[0].argmax(-1)).sum())
                p1 = int((pt16[0].argmax(-1) == ref32[0].argmax(-1)).sum())
                g["top1"], g["pytorch_top1"] = t1, p1
            g["problem"] = problem or gpu_problem(g)
            g["ok"] = g["problem"] is None
            info["gpu"] = g
    except Exception as exc:
        info["gpu"] = {"error": "PyTorch: " + error_text(exc)}
        torch.cuda.empty_cache()
    info["gpu_s"] = round(time.time() - t0, 1)


def bench(torch, binary, info, model, make, desc, graph_inputs, timeout, iters, extra=()):
    """Batch-1 latency and batch-64 throughput, tcinfer and PyTorch fp16 (CUDA graphs)."""
    t0 = time.time()
    info["bench"] = {}
    for b in BENCH_BATCHES:
        row = {}
        shapes = []
        for n, (_, shape, _) in desc.items():
            if n in graph_inputs:
                shapes += ["--shape", "%s:%s" % (n, "x".join(str(d) for d in [b] + list(shape)))]
        gpu = info.get("gpu", {"error": 1})
        if "error" not in gpu or b == 1:
            run_timeout, args = auto_bench_args(info, gpu, timeout, extra)
            row["tcinfer"] = tcinfer_bench(binary, info["onnx"], shapes, iters, run_timeout, args)
            if "--fp32-layers" in args and is_fp16_overflow(row["tcinfer"].get("error")):
                # the layers the accuracy input needed in fp32 do not cover the timing's input
                # (uniform --random against the accuracy phase's): a search on that input
                row["tcinfer"] = tcinfer_bench(binary, info["onnx"], shapes, iters,
                                               *auto_search_args(info, timeout, extra))
                row["tcinfer"]["own_search"] = True
        try:
            row["pytorch"] = pytorch_bench(torch, model, make, b, iters)
        except Exception as exc:
            row["pytorch"] = {"error": error_text(exc)}
            torch.cuda.empty_cache()
        info["bench"][str(b)] = row
        if "tcinfer" in row and "error" in row["tcinfer"]:
            break
    info["bench_s"] = round(time.time() - t0, 1)


# ---------------------------------------------------------------- report

def auto_tag(auto):
    """'auto: N layers fp32' for a row --precision auto answered, else ''."""
    if not auto or "error" in auto:
        return ""
    n = len(auto.get("fp32_layers", []))
    return "auto: %d layer%s fp32" % (n, "" if n == 1 else "s")


def gpu_verdict(gpu):
    """(passed, text) of a row's GPU result: 'pass', 'pass (auto: N layers fp32)' where the
    fp16 engine overflowed and --precision auto's engine passes, else why it fails."""
    if "error" in gpu:
        return False, "GPU: " + gpu["error"]
    tag = auto_tag(gpu.get("auto"))
    problem = gpu_problem(gpu)
    if problem:
        return False, "GPU%s: %s" % (" (%s)" % tag if tag else "", problem)
    return True, "pass (%s)" % tag if tag else "pass"


def passes(info):
    """Whether the row is correct on the CPU and the GPU (--precision auto's answer
    included)."""
    v = verdict(info)
    return v == "pass" or v.startswith("pass (")


def gpu_problem(gpu):
    """Why the GPU numbers fail (None: they pass), judged from the numbers themselves so that
    every row of a report is held to the same rule."""
    e, pt = gpu.get("rel_l2", float("inf")), gpu.get("pytorch_fp16_rel_l2", 0.0)
    if not e <= GPU_ERROR_MARGIN * pt:
        return "rel L2 %.3g > %g x PyTorch fp16's %.3g" % (e, GPU_ERROR_MARGIN, pt)
    if "top1" in gpu and gpu["top1"] != ACC_BATCH:
        return "top-1 %d/%d%s" % (gpu["top1"], ACC_BATCH, _pytorch_top1(gpu))
    return None


def _pytorch_top1(gpu):
    """PyTorch fp16's own top-1 agreement on the same rows, shown beside tcinfer's (the verdict
    reads tcinfer's alone)."""
    return " (PyTorch fp16 %d/%d)" % (gpu["pytorch_top1"], ACC_BATCH) if "pytorch_top1" in gpu \
        else ""


def cpu_within_fp64(cpu):
    """Whether a CPU row past CPU_REL_L2 is fp32 rounding: tcinfer no further from PyTorch's
    fp64 than onnxruntime (within CPU_FP64_MARGIN)."""
    f = cpu.get("fp64")
    return bool(f) and f["tcinfer"] <= CPU_FP64_MARGIN * f["onnxruntime"]


def cpu_correct(info):
    cpu = info.get("cpu", {})
    return "error" not in info and "error" not in cpu and bool(cpu.get("ok")
                                                                or cpu_within_fp64(cpu))


def verdict(info):
    """'pass' ('pass (auto: N layers fp32)' where --precision auto answered an fp16 overflow)
    or the first reason the row fails."""
    if "error" in info:
        return info["error"]
    cpu, gpu = info.get("cpu", {}), info.get("gpu", {})
    if "error" in cpu:
        return "CPU: " + cpu["error"]
    if not cpu_correct(info):
        why = "CPU: " + (cpu.get("problem") or "wrong")
        if "fp64" in cpu:
            why += " (against PyTorch fp64: tcinfer %.2g, onnxruntime %.2g)" % (
                cpu["fp64"]["tcinfer"], cpu["fp64"]["onnxruntime"])
        return why
    if not gpu:
        plan = info.get("plan", {})
        if "error" in plan:
            return "GPU plan: " + plan["error"]
        return "CPU pass; GPU not run" + (" (its plan builds)" if plan else "")
    return gpu_verdict(gpu)[1]


def _cell(text, limit=160):
    text = re.sub(r"tcinfer: \S+\.onnx: ", "", " ".join(str(text).split())).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _bench_cells(info):
    cells = []
    for b in BENCH_BATCHES:
        row = info.get("bench", {}).get(str(b), {})
        tc, pt = row.get("tcinfer"), row.get("pytorch")
        if not tc or "error" in tc or not pt or "error" in pt:
            cells.append("-")
            continue
        if b == 1:
            cell = "%s / %s (%.2fx)" % (fmt_ms(tc["median_ms"]), fmt_ms(pt["median_ms"]),
                                        pt["median_ms"] / tc["median_ms"])
        else:
            cell = "%.0f / %.0f (%.2fx)" % (1000 * b / tc["median_ms"], 1000 * b / pt["median_ms"],
                                           pt["median_ms"] / tc["median_ms"])
        # the accuracy phase's fp32 layers overflowed on the timing's input: a search of its own
        cells.append(cell + (", own search" if tc.get("own_search") else ""))
    return cells


def report(results_dir, path):
    infos = []
    for f in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        with open(f) as fh:
            infos.append(json.load(fh))
    rows = []
    n_cpu = n_gpu = n_auto = n_gpu_run = n_plan = n_plan_run = 0
    for i in infos:
        cpu, gpu = i.get("cpu", {}), i.get("gpu", {})
        n_cpu += cpu_correct(i)
        n_gpu += passes(i)
        n_auto += passes(i) and bool(auto_tag(gpu.get("auto")))
        n_gpu_run += bool(gpu)
        n_plan_run += "plan" in i
        n_plan += bool(i.get("plan", {}).get("ok"))
        cpu_cell = ("%.1e" % cpu["rel_l2"]) if "rel_l2" in cpu else "-"
        if not cpu.get("ok") and cpu_within_fp64(cpu):
            cpu_cell += " (fp64: %.1e, onnxruntime %.1e)" % (cpu["fp64"]["tcinfer"],
                                                             cpu["fp64"]["onnxruntime"])
        gpu_cell = "-"
        if "rel_l2" in gpu:
            gpu_cell = "%.2e vs %.2e" % (gpu["rel_l2"], gpu["pytorch_fp16_rel_l2"])
            if "top1" in gpu:
                gpu_cell += ", top-1 %d/%d%s" % (gpu["top1"], ACC_BATCH, _pytorch_top1(gpu))
        rows.append([i["name"], _cell(i.get("exporter", "-"), 40), cpu_cell, gpu_cell]
                    + _bench_cells(i) + [_cell(verdict(i))])
    date = datetime.date.today().isoformat()
    lines = [
        "# The model zoo sweep", "",
        "`bench/zoo.py`, rendered %s: public architectures with random weights (seed 0; "
        "BatchNorm statistics measured on random inputs; weight matrices an initialiser leaves "
        "all zeros, such as the classifier heads of ViTs and MLP mixers, filled with seeded "
        "random values), exported to ONNX and run through "
        "tcinfer. The CPU and plan checks need no GPU (`--phase cpu`); the GPU accuracy and "
        "speed columns come from runs on the H200 (`--phase acc` and `bench`) and are filled "
        "only for the models such a run reached. "
        "CPU: tcinfer's fp32 reference against onnxruntime, relative L2 (pass <= %g; past it, "
        "both against PyTorch in fp64, shown in brackets: pass when tcinfer is no further from "
        "fp64 than onnxruntime, within x%g). "
        "GPU: tcinfer fp16 against PyTorch fp32 (TF32 off), next to PyTorch fp16's error against "
        "the same reference, on %d seeded inputs (pass: no worse, within x%g for the spread "
        "between two correct fp16 engines on so few inputs, and the same top-1 on every row "
        "for classifiers). Speed: batch-1 latency tcinfer / PyTorch fp16 ms and batch-64 "
        "throughput tcinfer / PyTorch fp16 per second, PyTorch timed as CUDA graph replays; "
        "the ratio is PyTorch ms / tcinfer ms (> 1: tcinfer faster). Where the fp16 engine "
        "overflows (NaN/Inf that the fp32 reference does not hold), the row is tcinfer's "
        "`--precision auto` (fp16 with the layers that overflow kept in fp32, chosen on the same "
        "inputs), timed with it too: \"pass (auto: N layers fp32)\", or why it fails." % (
            date, CPU_REL_L2, CPU_FP64_MARGIN, ACC_BATCH, GPU_ERROR_MARGIN),
        "",
        "Correct on the CPU reference: %d of %d. GPU engine run: %d models, correct (CPU and "
        "GPU): %d%s.%s" % (n_cpu, len(infos), n_gpu_run, n_gpu,
                           " (%d of them with --precision auto after an fp16 overflow)" % n_auto
                           if n_auto else "",
                         " GPU plan built without a GPU (`tcinfer --plan`: every op has a GPU "
                         "path for these shapes): %d of %d checked." % (n_plan, n_plan_run)
                         if n_plan_run else ""),
        "",
        markdown_table(["model", "exporter, opset", "CPU rel L2", "GPU rel L2 vs PyTorch fp16",
                        "b1 ms tcinfer / PyTorch", "b64 /s tcinfer / PyTorch", "result"], rows),
        "",
    ]
    text = "\n".join(lines)
    with open(path, "w") as fh:
        fh.write(text)
    print(text)


# ---------------------------------------------------------------- main

def phase_done(results, name, phase):
    """Whether an earlier run left NAME's result for PHASE (an export error counts as done; a
    timing that tcinfer could not run does not: it is tried again)."""
    path = os.path.join(results, slug(name) + ".json")
    if not os.path.exists(path):
        return False
    with open(path) as fh:
        earlier = json.load(fh)
    keys = {"acc": ("gpu",), "bench": ("bench",), "all": ("gpu", "bench"), "cpu": ("cpu",)}[phase]
    timed = all("error" not in cell.get("tcinfer", {})
                for cell in earlier.get("bench", {}).values())
    return "error" in earlier or (all(k in earlier for k in keys) and
                                  ("bench" not in keys or timed))


def cpu_phase(args, specs):
    """The sweep without a GPU: export, CPU check and GPU plan in the workers; an earlier JSON
    file's GPU accuracy and timings are kept."""
    binary = resolve_binary(args.tcinfer)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.results, exist_ok=True)
    started = time.time()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(export_one, s.name, args.work, binary, args.timeout,
                               args.cpu_batch, True) for s in specs]
        for f in futures:
            info = f.result()
            out = os.path.join(args.results, slug(info["name"]) + ".json")
            if os.path.exists(out):
                with open(out) as fh:
                    earlier = json.load(fh)
                for key in ("gpu", "bench", "gpu_s", "bench_s"):
                    if key in earlier and "error" not in info:
                        info[key] = earlier[key]
            save_result(out, info)
            print("%-40s %s  (export %ss, cpu %ss)" % (info["name"], verdict(info),
                                                       info.get("export_s"), info.get("cpu_s")),
                  flush=True)
            if args.deadline and time.time() - started > args.deadline:
                print("deadline: stopping", flush=True)
                for g in futures:
                    g.cancel()
                break
    return 0


def save_result(path, info):
    """Writes one model's result JSON, without "onnx": the path of the export on the machine
    that ran it, which means nothing elsewhere (the next run sets it from its own export)."""
    with open(path, "w") as fh:
        json.dump({k: v for k, v in info.items() if k != "onnx"}, fh, indent=1)


def with_earlier_cpu(info, out):
    """--gpu-only: the export info with the CPU check of the result file out (a JSON an earlier
    acc run left), or None (said) where there is none."""
    earlier = None
    if os.path.exists(out):
        with open(out) as fh:
            earlier = json.load(fh)
    if not earlier or "cpu" not in earlier:
        print("%-40s no earlier CPU check in %s: run --phase acc without --gpu-only" %
              (info["name"], out), flush=True)
        return None
    if "inputs" not in info:  # exported earlier into this --work folder
        info = dict(earlier, onnx=info["onnx"])
    for k in ("cpu", "cpu_batch", "cpu_s", "graph_inputs"):
        if k in earlier:
            info[k] = earlier[k]
    for k in ("gpu", "gpu_s", "bench", "bench_s"):
        info.pop(k, None)
    return info


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tcinfer", default="build/tcinfer")
    p.add_argument("--work", default="out/zoo", help="ONNX files and inputs (default %(default)s)")
    p.add_argument("--results", default="out/zoo/results", help="one JSON per model")
    p.add_argument("--part", default="1/1", help="I/N: run the I-th of N equal parts of the list")
    p.add_argument("--only", default="", help="comma-separated names (or name prefixes) to run")
    p.add_argument("--list", action="store_true", help="print the models and exit")
    p.add_argument("--jobs", type=int, default=8, help="export processes (default %(default)s)")
    p.add_argument("--iters", type=int, default=30, help="timed runs per cell")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per tcinfer call")
    p.add_argument("--phase", choices=("all", "acc", "bench", "cpu"), default="all",
                   help="acc: export, CPU and GPU accuracy; bench: timings only, added to the "
                        "JSON file an acc run left (several acc runs may share the GPU; timings "
                        "need it alone); cpu: no GPU at all: export, the CPU check on "
                        "--cpu-batch rows and the GPU plan (tcinfer --plan), merged into an "
                        "earlier JSON file's GPU results")
    p.add_argument("--cpu-batch", type=int, default=ACC_BATCH,
                   help="rows of the CPU check (default %%(default)s; the GPU check always runs "
                        "%d rows): fewer make a sweep's CPU half faster" % ACC_BATCH)
    p.add_argument("--tcinfer-arg", action="append", default=[], metavar="ARG",
                   help="one more argument of every GPU tcinfer run (repeatable), e.g. "
                        "--tcinfer-arg=--kernels --tcinfer-arg=wmma to see which kernel family "
                        "a row's error comes from (give it its own --results folder)")
    p.add_argument("--gpu-only", action="store_true",
                   help="acc phase: no CPU check; each row keeps the CPU check of the result file "
                        "an earlier acc run left in --results (rows without one are left out): "
                        "a GPU re-run after a GPU change takes a fraction of the time; write "
                        "into a copy of the results, without --resume, which would leave out "
                        "the rows that already hold GPU results. It drops a row's timings (they "
                        "were of the earlier build): --phase all --gpu-only times each row again "
                        "right after its accuracy run")
    p.add_argument("--deadline", type=float, default=0,
                   help="stop starting models after this many seconds (0: none)")
    p.add_argument("--report", metavar="MD", help="render every result JSON into MD and exit")
    p.add_argument("--replan", action="store_true",
                   help="re-run the GPU plan check of the results with --tcinfer and exit")
    p.add_argument("--resume", action="store_true",
                   help="leave out the models whose result JSON already holds this phase's "
                        "result (or an error), so that a sweep cut by --deadline goes on")
    args = p.parse_args(argv)
    if args.report:
        report(args.results, args.report)
        return 0
    if args.gpu_only and args.phase not in ("acc", "all"):
        p.error("--gpu-only goes with --phase acc or all")
    if args.replan:
        replan(args.results, args.work, resolve_binary(args.tcinfer), args.timeout)
        return 0
    specs = all_specs()
    if args.only:
        want = [w for w in args.only.split(",") if w]
        specs = [s for s in specs if any(s.name == w or s.name.startswith(w) for w in want)]
    i, n = (int(v) for v in args.part.split("/"))
    specs = specs[i - 1::n]
    if args.list:
        for s in specs:
            print(s.name, "-", s.family)
        return 0
    if args.resume:
        specs = [s for s in specs if not phase_done(args.results, s.name, args.phase)]
        print("resume: %d models left" % len(specs), flush=True)
    if args.phase == "cpu":
        return cpu_phase(args, specs)
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    binary = resolve_binary(args.tcinfer)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.results, exist_ok=True)
    started = time.time()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        check_cpu = binary if args.phase != "bench" and not args.gpu_only else None
        futures = [pool.submit(export_one, s.name, args.work, check_cpu, args.timeout,
                               args.cpu_batch) for s in specs]
        for f in futures:
            info = f.result()
            out = os.path.join(args.results, slug(info["name"]) + ".json")
            if args.deadline and time.time() - started > args.deadline:
                print("deadline: stopping before %s" % info["name"], flush=True)
                break
            phases = ("acc", "bench") if args.phase == "all" else (args.phase,)
            if args.phase == "bench" and os.path.exists(out):
                with open(out) as fh:
                    earlier = json.load(fh)
                if "error" in info or "error" in earlier:
                    continue  # the acc run's row stands
                earlier["onnx"] = info["onnx"]
                info = earlier
            elif args.gpu_only and "error" not in info:
                info = with_earlier_cpu(info, out)
                if info is None:
                    continue
            if "error" not in info:
                try:
                    if args.tcinfer_arg:
                        info["tcinfer_args"] = args.tcinfer_arg
                    sweep_one(torch, binary, info, args.work, args.timeout, args.iters, phases,
                              args.tcinfer_arg)
                except Exception as exc:
                    info["error"] = "sweep: " + error_text(exc)
                    info["traceback"] = traceback.format_exc()[-2000:]
            save_result(out, info)
            print("%-40s %s  (export %ss, cpu %ss, gpu %ss, bench %ss)" % (
                info["name"], verdict(info), info.get("export_s"), info.get("cpu_s"),
                info.get("gpu_s"), info.get("bench_s")), flush=True)
        for f in futures:
            f.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The transformer family of bench_models.py: ViT-B/16, DeiT-S, Swin-T, ConvNeXt-T, BERT-base
(sequence 128 and 384) and GPT-2 small (one 512-token prefill), tcinfer against PyTorch fp16
with scaled_dot_product_attention and CUDA graphs.

What is here: the models (random weights, seed 0, built offline), their export (through
model_export.py, as zoo.py exports them), their timing inputs and tcinfer arguments, how
PyTorch runs their attention, the accuracy check (zoo.py's, against PyTorch fp32), the dry run's
checks without a GPU, and the report's tables and checks. bench_models.py drives it.
torch is passed in, so importing this module needs the standard library only.
"""

import os
import re

from model_export import (error_text, export_onnx, make_inputs, text_inputs,
                          transformers_model, tuple_outputs)

# Issue 15's targets for this family, against PyTorch fp16 with flash SDPA and CUDA graphs
TARGET_B1_LATENCY_RATIO = 0.7   # batch 1: tcinfer ms / PyTorch ms
TARGET_THROUGHPUT_RATIO = 1.5   # the large batch: tcinfer items/s / PyTorch items/s
ACC_BATCH = 4                   # rows of the accuracy check (zoo.py's ACC_BATCH)
DRY_REL_L2 = 1e-4               # dry run: tcinfer's CPU reference against PyTorch fp32 on the CPU
IMAGE = (3, 224, 224)


class Spec:
    """One model of the family. build(torch) -> (model, input desc) with seeded weights;
    attention: how PyTorch runs its attention in the timed runs (the environment section)."""

    def __init__(self, name, title, batches, build, classifier, attention, seq=None, vocab=None,
                 channels_last=False, pytorch_kwargs=None):
        self.name, self.title, self.batches, self.build = name, title, tuple(batches), build
        self.classifier, self.attention, self.seq = classifier, attention, seq
        self.channels_last = channels_last
        # token models: what the timed PyTorch runs pass the transformers model besides the ids
        self.pytorch_kwargs = dict(pytorch_kwargs or {})
        # the inputs, {name: (kind, shape without the batch, vocab)} as make_inputs takes them
        self.desc = (text_inputs(None, vocab, seq) if seq else
                     {"input": ("float", IMAGE, 0)})


def _torchvision(name, fix_head=False):
    def build(torch):
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)
        if fix_head:
            # torchvision zero-initialises ViT's classifier (all logits 0): random weights give
            # the accuracy check logits to compare and a top-1 to agree on
            torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        return model, {"input": ("float", IMAGE, 0)}
    return build


def _timm(name):
    def build(torch):
        import timm
        return timm.create_model(name, pretrained=False), {"input": ("float", IMAGE, 0)}
    return build


def _hf(kind, seq, **kw):
    inner = transformers_model(kind, seq=seq, attn_implementation="sdpa", **kw)

    def build(torch):
        model, desc, _ = inner(torch)
        return model, desc
    return build


MHA_FASTPATH = ("nn.MultiheadAttention fast path (eval, inference_mode, need_weights=False, "
                "torch.backends.mha fast path on): torch._native_multi_head_attention, which "
                "calls scaled_dot_product_attention")
HF_SDPA = ("transformers attn_implementation='sdpa'; the timed runs' all-ones attention_mask is "
           "passed as None, which transformers does itself in eager mode (its all-ones test is "
           "a host sync that a CUDA graph cannot capture), so SDPA runs without a mask")

SPECS = [
    Spec("vit_b_16", "ViT-B/16 (torchvision)", (1, 64), _torchvision("vit_b_16", True), True,
         MHA_FASTPATH),
    Spec("deit_small", "DeiT-S (timm deit_small_patch16_224)", (1, 64),
         _timm("deit_small_patch16_224"), True,
         "timm Attention.fused_attn: F.scaled_dot_product_attention"),
    Spec("swin_t", "Swin-T (torchvision)", (1, 64), _torchvision("swin_t"), True,
         "torchvision shifted_window_attention: explicit matmul + softmax (relative position "
         "bias and shift mask), no SDPA call in the model"),
    Spec("convnext_tiny", "ConvNeXt-T (torchvision)", (1, 64), _torchvision("convnext_tiny"),
         True, "no attention (channels_last)", channels_last=True),
    Spec("bert_base_128", "BERT-base (transformers), sequence 128", (1, 32),
         _hf("bert", 128), False, HF_SDPA + "; not causal", seq=128, vocab=30522),
    Spec("bert_base_384", "BERT-base (transformers), sequence 384", (1, 32),
         _hf("bert", 384), False, HF_SDPA + "; not causal", seq=384, vocab=30522),
    Spec("gpt2_512", "GPT-2 small (transformers), one 512-token prefill (last position's logits)",
         (1, 64), _hf("gpt2", 512, logits_to_keep=1), False,
         HF_SDPA + "; causal (is_causal=True); use_cache=True and logits_to_keep=1, as "
         "generate's prefill calls it (without a cache transformers tests the position ids for "
         "packed sequences, another host sync)", seq=512, vocab=50257,
         pytorch_kwargs={"use_cache": True, "logits_to_keep": 1}),
]
SPEC = {s.name: s for s in SPECS}
MODELS = tuple(s.name for s in SPECS)


def build(torch, name):
    """(model returning a flat tuple, input desc): fp32, eval, on the CPU, weights seeded 0."""
    torch.manual_seed(0)
    model, desc = SPEC[name].build(torch)
    if desc != SPEC[name].desc:
        raise ValueError("%s: the builder's inputs %s differ from the spec's %s"
                         % (name, desc, SPEC[name].desc))
    return tuple_outputs(torch, model.eval()), desc


def export(torch, name, path, force):
    """Writes PATH unless it exists (or force); a note on how it was made."""
    import time
    if os.path.exists(path) and not force:
        return "exists"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    model, desc = build(torch, name)
    x = make_inputs(torch, desc, 2, 0)
    names = list(x)
    with torch.no_grad():
        outs = model(*x.values())
    out_names = ["output_%d" % i for i in range(len(outs))]
    # the fused attention fast path has no ONNX export: export the plain attention ops
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    tmp = path + ".tmp"
    t0 = time.time()
    try:
        how, note = export_onnx(torch, model, tuple(x.values()), tmp, names, out_names,
                                {n: {0: "batch"} for n in names})
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    os.replace(tmp, path)
    return "%s, %.1f s, %.1f MB%s" % (how, time.time() - t0, os.path.getsize(path) / 1e6,
                                      "; " + note if note else "")


# ---------------------------------------------------------------- timing inputs

def timing_inputs(torch, desc, batch):
    """The timed runs' inputs (CPU tensors, seed 0): full-length prompts (an all-ones mask)."""
    return make_inputs(torch, desc, batch, 0, padded=False)


def shape_args(desc, batch):
    """tcinfer's --shape arguments of every input at this batch."""
    shapes = []
    for n, (_, shape, _) in desc.items():
        shapes += ["--shape", "%s:%s" % (n, "x".join(str(d) for d in (batch,) + tuple(shape)))]
    return shapes


def tcinfer_input_args(desc, batch, folder, x=None):
    """--shape arguments, and the inputs: --random 0 for images; token ids and the mask as
    .npy files written to folder (x: their tensors, from timing_inputs)."""
    import numpy as np
    shapes = shape_args(desc, batch)
    if all(kind == "float" for kind, _, _ in desc.values()):
        return shapes, ["--random", "0"]
    os.makedirs(folder, exist_ok=True)
    inputs = []
    for n, v in x.items():
        p = os.path.join(folder, "%s_b%d.npy" % (n, batch))
        np.save(p, np.asarray(v))
        inputs.append("%s=%s" % (n, p))
    return shapes, inputs


def pytorch_step(torch, spec, model, x, device="cuda", dtype=None):
    """A callable running the model (build's, already .half().cuda()) on the timing inputs x,
    as the timed PyTorch runs call it; it returns a tuple of tensors. The dry run calls it on
    the CPU in fp32 (device, dtype)."""
    dtype = dtype or torch.float16
    if spec.seq:
        hf = model.inner.inner  # tuple_outputs' wrapper, then transformers_model's ByName
        ids = x["input_ids"].to(device)
        kw = spec.pytorch_kwargs

        # the all-ones mask as None: see HF_SDPA
        return lambda: tuple(v for v in hf(input_ids=ids, attention_mask=None, **kw).to_tuple()
                             if torch.is_tensor(v))
    v = x["input"].to(device, dtype)
    v = v.contiguous(memory_format=torch.channels_last) if spec.channels_last else v
    return lambda: model(v)


def dry_step_check(torch, name, batch=2):
    """The dry run's check of the timed PyTorch call (on the CPU, fp32): it runs, and gives
    what the exported graph's inputs give (for the token models: the mask passed as None
    against the all-ones mask)."""
    from zoo import compare_outputs
    model, desc = build(torch, name)
    x = timing_inputs(torch, desc, batch)
    step = pytorch_step(torch, SPEC[name], model, x, "cpu", torch.float32)
    with torch.inference_mode():
        got = [o.numpy() for o in step()]
        ref = [o.numpy() for o in model(*x.values())]
    e, problem = compare_outputs(got, ref, DRY_REL_L2)
    return {"rel_l2": e, "ok": problem is None, "problem": problem}


def attention_kernels(torch, step):
    """The GPU kernels of one eager run whose names say attention or softmax: which SDPA
    backend PyTorch chose (flash, memory-efficient, math), or that there is none."""
    from torch.profiler import ProfilerActivity, profile
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events()
                    if re.search(r"flash|fmha|attention|sdp|softmax", e.name, re.I)})
    return [n if len(n) <= 90 else n[:87] + "..." for n in names]


def sdpa_settings(torch):
    b = torch.backends.cuda
    return {"flash_sdp_enabled": b.flash_sdp_enabled(),
            "mem_efficient_sdp_enabled": b.mem_efficient_sdp_enabled(),
            "math_sdp_enabled": b.math_sdp_enabled(),
            "mha_fastpath_enabled": torch.backends.mha.get_fastpath_enabled()}


def library_versions():
    v = {}
    for mod in ("torchvision", "timm", "transformers"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:
            v[mod] = "not available (%s)" % error_text(e)
    return v


# ---------------------------------------------------------------- accuracy

def _zoo_info(name, path, desc):
    return {"name": "bench/" + name, "onnx": path, "classifier": SPEC[name].classifier,
            "inputs": {n: [k, list(shape), vocab] for n, (k, shape, vocab) in desc.items()}}


def gpu_accuracy(torch, binary, name, model, desc, path, work, timeout):
    """zoo.py's GPU check: tcinfer fp16 against PyTorch fp32 (TF32 off) on ACC_BATCH seeded
    inputs (a padded mask tail for the text models), next to PyTorch fp16's error."""
    import zoo
    info = _zoo_info(name, path, desc)
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        zoo.gpu_check(torch, binary, info, model, work, timeout)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    return info["gpu"]


def cpu_accuracy(torch, binary, name, model, desc, path, work, timeout):
    """The dry run's check: tcinfer's CPU reference on the exported file against the PyTorch
    model in fp32 on the CPU, on the accuracy inputs: the export, the rebuilt weights and the
    inputs' names and dtypes all agree."""
    import zoo
    info = _zoo_info(name, path, desc)
    x, _, input_args, shape_args = zoo.accuracy_inputs(torch, info, work, ACC_BATCH)
    with torch.no_grad():
        ref = [o.numpy() for o in model(*x.values())]
    got, err = zoo.tcinfer_outputs(binary, path, "cpu", input_args, shape_args,
                                   os.path.join(work, zoo.slug(info["name"]), "cpu"), timeout)
    if err:
        return {"error": err}
    e, problem = zoo.compare_outputs(got, ref, DRY_REL_L2)
    return {"rel_l2": e, "ok": problem is None, "problem": problem}


def accuracy_ok(a):
    return "error" not in a and a.get("problem") is None


# ---------------------------------------------------------------- report

def _items(spec):
    return "seq" if spec.seq else "img"


def _ratio(pt, tc):
    if not pt or not tc or "error" in pt or "error" in tc:
        return None
    if pt["median_ms"] <= 0 or tc["median_ms"] <= 0:
        return None
    return pt["median_ms"] / tc["median_ms"]


def checks(results):
    """'PASS/FAIL/n/a: ...' lines: batch-1 latency <= 0.7x PyTorch's and the large batch's
    throughput >= 1.5x PyTorch's, for every model of the family measured."""
    lines = []
    by = {(r["model"], r["batch"]): r for r in results}
    for name in [s.name for s in SPECS if any(r["model"] == s.name for r in results)]:
        spec = SPEC[name]
        for b in sorted({r["batch"] for r in results if r["model"] == name}):
            r = by[(name, b)]
            s = _ratio(r["pytorch"], r["tcinfer"])
            if b == 1:
                what = "%s batch 1 latency tcinfer/PyTorch" % name
                if s is None:
                    lines.append("n/a : %s <= %.1f (no result)" % (what, TARGET_B1_LATENCY_RATIO))
                    continue
                ok = 1.0 / s <= TARGET_B1_LATENCY_RATIO
                lines.append("%s: %s %.2f <= %.1f (%.3f vs %.3f ms)" % (
                    "PASS" if ok else "FAIL", what, 1.0 / s, TARGET_B1_LATENCY_RATIO,
                    r["tcinfer"]["median_ms"], r["pytorch"]["median_ms"]))
            elif b == max(spec.batches):
                what = "%s batch %d throughput tcinfer/PyTorch" % (name, b)
                if s is None:
                    lines.append("n/a : %s >= %.1f (no result)" % (what, TARGET_THROUGHPUT_RATIO))
                    continue
                lines.append("%s: %s %.2f >= %.1f (%.0f vs %.0f %s/s)" % (
                    "PASS" if s >= TARGET_THROUGHPUT_RATIO else "FAIL", what, s,
                    TARGET_THROUGHPUT_RATIO, 1000.0 * b / r["tcinfer"]["median_ms"],
                    1000.0 * b / r["pytorch"]["median_ms"], _items(spec)))
    return lines


def accuracy_checks(acc):
    lines = []
    for name, a in acc:
        if "error" in a:
            lines.append("FAIL: %s accuracy: %s" % (name, a["error"]))
        elif "pytorch_fp16_rel_l2" in a:
            lines.append("%s: %s rel L2 against PyTorch fp32 %.3g, PyTorch fp16's %.3g%s%s" % (
                "PASS" if accuracy_ok(a) else "FAIL", name, a["rel_l2"], a["pytorch_fp16_rel_l2"],
                ", top-1 %d/%d" % (a["top1"], ACC_BATCH) if "top1" in a else "",
                " (%s)" % a["problem"] if a.get("problem") else ""))
        else:
            lines.append("%s: %s tcinfer CPU reference against PyTorch fp32 (CPU) rel L2 %.3g "
                         "<= %g" % ("PASS" if a["ok"] else "FAIL", name, a["rel_l2"], DRY_REL_L2))
    return lines


def timing_table(results, fmt_ms, markdown_table):
    rows = []
    for r in results:
        spec, b = SPEC[r["model"]], r["batch"]

        def cell(res):
            if res is None:
                return "-"
            if "error" in res:
                text = " ".join(("error: " + res["error"]).split()).replace("|", "\\|")
                return text if len(text) <= 80 else text[:77] + "..."
            return "%s (%.0f %s/s)%s" % (fmt_ms(res["median_ms"]), 1000.0 * b / res["median_ms"],
                                         _items(spec), ", eager" if res.get("how", "graph")
                                         != "graph" else "")
        s = _ratio(r["pytorch"], r["tcinfer"])
        rows.append([r["model"], b, spec.seq or "-", cell(r["pytorch"]), cell(r["tcinfer"]),
                     "%.2fx" % s if s is not None else "-"])
    return markdown_table(["model", "batch", "seq", "PyTorch fp16 ms (items/s)",
                           "tcinfer ms (items/s)", "speed-up"], rows)


def accuracy_table(acc, markdown_table):
    rows = []
    for name, a in acc:
        if "error" in a:
            rows.append([name, " ".join(("error: " + a["error"]).split())[:120].replace("|", "\\|"),
                         "-", "-", "FAIL"])
            continue
        if "pytorch_fp16_rel_l2" not in a:  # the dry run's CPU check
            rows.append([name, "%.3g (CPU reference)" % a["rel_l2"], "-", "-",
                         "PASS" if a["ok"] else "FAIL"])
            continue
        t1 = ("%d/%d vs %d/%d" % (a["top1"], ACC_BATCH, a["pytorch_top1"], ACC_BATCH)
              if "top1" in a else "-")
        rows.append([name, "%.3g" % a["rel_l2"], "%.3g" % a["pytorch_fp16_rel_l2"], t1,
                     "PASS" if accuracy_ok(a) else "FAIL: " + str(a.get("problem"))])
    return markdown_table(["model", "tcinfer fp16 rel L2", "PyTorch fp16 rel L2",
                           "top-1 tcinfer vs PyTorch fp16", "no worse than PyTorch fp16"], rows)


def environment_lines(env):
    """The environment section: versions, SDPA switches, and per model how PyTorch runs its
    attention and the attention kernels seen in one eager run."""
    lines = ["PyTorch settings: fp16 weights and inputs, inference_mode, CUDA graph replay; "
             "SDPA backends %s; library versions %s." % (
                 ", ".join("%s=%s" % kv for kv in sorted(env.get("sdpa", {}).items())) or "-",
                 ", ".join("%s %s" % kv for kv in sorted(env.get("libraries", {}).items())) or "-"),
             ""]
    for name in MODELS:
        if name not in env.get("attention", {}):
            continue
        seen = env["attention"][name]
        lines.append("- %s: %s. Kernels seen: %s" % (
            name, SPEC[name].attention,
            seen if isinstance(seen, str) else (", ".join("`%s`" % k for k in seen) or "none")))
    return lines

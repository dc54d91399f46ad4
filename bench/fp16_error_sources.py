#!/usr/bin/env python3
"""Where an fp16 engine's error comes from on the bench models: an fp64 emulation.

The models and the accuracy batch are bench_models.py's (random weights, seed 0, recalibrated
BatchNorm; uniform [-1, 1) inputs, seed 0). Each variant runs the model in fp64 with chosen values
rounded to fp16 (round to nearest even, like the engine's conversions) and prints its relative L2
error and top-1 agreement against plain fp64:

- input: the input batch;
- weights: each convolution's weights and bias after BatchNorm folding (what the engine packs),
  and the Linear layers';
- activations: every tensor the engine stores between steps: the output of each fused
  conv + BatchNorm + activation (+ residual add) step, of pooling and of Linear;
- activations of one stage: the same, inside that stage only.

With the math exact, what is left is the error of fp16 storage itself, which no fp16 engine avoids.
Needs torch and torchvision (a GPU makes it take seconds)."""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_models as bm  # noqa: E402

# Per model: the stages whose activations are rounded one at a time (prefixes of module names).
STAGES = {
    "resnet50": ["relu", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc"],
    "mobilenet_v2": ["features.%d." % i for i in range(19)] + ["classifier"],
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=",".join(STAGES),
                   help="comma-separated subset of %s (default: both)" % ",".join(STAGES))
    p.add_argument("--batch", type=int, default=bm.ACCURACY_BATCH,
                   help="images (default %(default)s, the bench's accuracy batch)")
    a = p.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in STAGES:
            p.error("no stage list for %s (have %s)" % (m, ", ".join(STAGES)))
    if a.batch < 1:
        p.error("--batch must be positive")
    return a


def to_fp16(t):
    return t.half().double()


def conv_bn_pairs(torch, model):
    """(Conv2d, BatchNorm2d) pairs where the BatchNorm directly follows the convolution."""
    leaves = [m for m in model.modules() if not list(m.children())]
    return [(a, b) for a, b in zip(leaves, leaves[1:])
            if isinstance(a, torch.nn.Conv2d) and isinstance(b, torch.nn.BatchNorm2d)]


def round_weights(torch, model):
    """Rounds the folded weights and bias of every conv + BatchNorm pair to fp16, leaving the
    modules unfolded: conv(x, W') then BatchNorm equals conv(x, fp16(W * s)) + fp16(bias)."""
    with torch.no_grad():
        for conv, bn in conv_bn_pairs(torch, model):
            s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
            shape = s.reshape(-1, 1, 1, 1)
            conv.weight.copy_(to_fp16(conv.weight * shape) / shape)
            conv_bias = conv.bias * s if conv.bias is not None else 0.0
            folded = bn.bias - bn.running_mean * s + conv_bias
            bn.bias.copy_(to_fp16(folded) + bn.running_mean * s - conv_bias)
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                m.weight.copy_(to_fp16(m.weight))
                if m.bias is not None:
                    m.bias.copy_(to_fp16(m.bias))


def store_points(torch, torchvision, model):
    """The modules whose outputs the engine stores: activations (where conv + BatchNorm + act is
    fused), residual blocks (conv + BatchNorm + add [+ act]), downsample branches, pooling and
    Linear. ReLU / ReLU6 commute with rounding, so rounding after them equals rounding before."""
    kinds = (torch.nn.ReLU, torch.nn.ReLU6, torch.nn.AdaptiveAvgPool2d, torch.nn.Linear,
             torchvision.models.resnet.Bottleneck, torchvision.models.mobilenetv2.InvertedResidual)
    return [(name, m) for name, m in model.named_modules()
            if isinstance(m, kinds) or name.endswith("downsample")]


def run(torch, torchvision, name, x, device, weights, prefixes, input_fp16):
    """fp64 logits with the chosen roundings; prefixes: activations of the store points whose
    names start with one of them (None: no activation rounded)."""
    model = bm.build_model(torch, torchvision, name).to(device).double()
    if weights:
        round_weights(torch, model)
    for point, module in store_points(torch, torchvision, model):
        if prefixes is not None and any(point.startswith(p) for p in prefixes):
            module.register_forward_hook(lambda mod, args, out: to_fp16(out))
    xs = torch.from_numpy(x).to(device).double()
    with torch.no_grad():
        return model(to_fp16(xs) if input_fp16 else xs).cpu().numpy()


def study(torch, torchvision, name, x, device):
    import numpy as np
    ref = run(torch, torchvision, name, x, device, False, None, False)

    def row(label, y):
        rel = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
        top1 = int((y.argmax(1) == ref.argmax(1)).sum())
        return "| %s | %s | %.3g | %d/%d |" % (name, label, rel, top1, len(x))

    rows = [
        row("input", run(torch, torchvision, name, x, device, False, None, True)),
        row("weights", run(torch, torchvision, name, x, device, True, None, False)),
        row("activations + input", run(torch, torchvision, name, x, device, False, [""], True)),
        row("weights + activations + input",
            run(torch, torchvision, name, x, device, True, [""], True)),
    ]
    for stage in STAGES[name]:
        rows.append(row("activations of %s only" % stage.rstrip("."),
                        run(torch, torchvision, name, x, device, False, [stage], False)))
    return rows


def main(argv=None):
    args = parse_args(argv)
    torch, torchvision = bm.import_torch(True)
    import numpy as np
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (args.batch,) + bm.IMAGE).astype(np.float32)
    print("fp16 rounding in fp64 math, batch %d, %s; relative L2 and top-1 against fp64\n"
          % (args.batch, device))
    print("| model | rounded to fp16 | rel L2 | top-1 |")
    print("| --- | --- | --- | --- |")
    for name in args.models:
        t0 = time.time()
        for line in study(torch, torchvision, name, x, device):
            print(line, flush=True)
        print("%s: %.1f s" % (name, time.time() - t0), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Per-layer kernel choice tables (docs/autotune_layers.md) from `tcinfer --info` output.

usage: scripts/autotune_layers.py TITLE INFO.txt [TITLE INFO.txt ...]

Each INFO.txt is what `tcinfer MODEL.onnx --shape input:Bx3x224x224 --info` printed on the GPU
machine; TITLE names it ("resnet50, batch 1"). For every non-depthwise convolution step the
table gives the fastest WMMA config's time, cuDNN's, which one the engine kept and its kernel;
steps that reuse the timing of an identical layer show those times too. Prints markdown.
"""
import re
import sys

# "<kernel> (<X> us; best tcinfer kernel <Y> us)": cuDNN kept, WMMA best at Y
LIB_KEPT = re.compile(r"^(?P<kernel>.*?) \((?:timed on an identical layer: )?(?P<lib>[0-9.]+) us; "
                      r"best tcinfer kernel (?P<wmma>[0-9.]+) us\)$")
# "<wmma config> (<X> us; cuDNN <kernel> <Y> us)": WMMA kept
WMMA_KEPT = re.compile(r"^(?P<kernel>wmma .*?) \((?:timed on an identical layer: )?(?P<wmma>[0-9.]+) us; "
                       r"cuDNN (?:(?P<libkernel>.*) )?(?P<lib>[0-9.]+) us\)$")
STEP = re.compile(r"^\s+(?P<step>\d+)\s+(?P<node>\S+)\s+(?P<fused>Conv\S*)\s+\S+\s+(?P<rest>.*)$")


def layer_name(node):
    name = node[:-len("/Conv")] if node.endswith("/Conv") else node
    return name[len("/features/"):] if name.startswith("/features/") else name


def rows_of(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = STEP.match(line.rstrip("\n"))
            if not m or m.group("rest").startswith("tcinfer depthwise"):
                continue
            rest = m.group("rest")
            lib, wmma = LIB_KEPT.match(rest), WMMA_KEPT.match(rest)
            if wmma:
                rows.append((m, float(wmma.group("wmma")), float(wmma.group("lib")), "WMMA",
                             wmma.group("kernel")))
            elif lib:
                rows.append((m, float(lib.group("wmma")), float(lib.group("lib")), "cuDNN",
                             lib.group("kernel")))
            else:
                sys.exit(f"{path}: step {m.group('step')}: unrecognised kernel text: {rest}")
    return rows


def section(title, path):
    rows = rows_of(path)
    if not rows:
        sys.exit(f"{path}: no convolution steps found")
    wins = sum(1 for r in rows if r[3] == "WMMA")
    wmma_ms = sum(r[1] for r in rows) / 1e3
    lib_ms = sum(r[2] for r in rows) / 1e3
    kept_ms = sum(r[1] if r[3] == "WMMA" else r[2] for r in rows) / 1e3
    out = [f"### {title}: WMMA wins {wins} of {len(rows)} convolutions; sum of per-layer times "
           f"(in graphs): WMMA-only {wmma_ms:.3f} ms, cuDNN-only {lib_ms:.3f} ms, "
           f"chosen {kept_ms:.3f} ms", "",
           "| step | layer | fused | best WMMA us | cuDNN us | chosen | kernel |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for m, wmma, lib, chosen, kernel in rows:
        out.append(f"| {m.group('step')} | {layer_name(m.group('node'))} | {m.group('fused')} | "
                   f"{wmma:.1f} | {lib:.1f} | {chosen} | {kernel} |")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 2 or len(argv) % 2:
        sys.exit(__doc__)
    print("\n".join(section(argv[i], argv[i + 1]) for i in range(0, len(argv), 2)), end="")


if __name__ == "__main__":
    main(sys.argv[1:])

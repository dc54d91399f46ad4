#!/usr/bin/env python3
"""scripts/autotune_layers.py on a made-up `tcinfer --info` listing: every kernel-text form the
engine prints for a convolution step, depthwise steps left out, sums (a WMMA config kept though
slower, as under --kernels wmma, counts at its own time), and an unknown form refused."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "autotune_layers.py")

INFO = """\
GPU plan: 5 steps, 1 layout conversions
  step  node                         fused ops                                output     kernel
     0  /conv1/Conv                  Conv+Relu                                NHWC8      IMPLICIT_PRECOMP_GEMM fused tensor-op (10.0 us; best tcinfer kernel 12.5 us)
     1  /maxpool/MaxPool             MaxPool                                  NHWC8      tcinfer pool2d
     2  /features/features.1/conv/conv.0/conv.0.0/Conv Conv+Clip                                NHWC8      tcinfer depthwise
     3  /layer1/layer1.0/conv1/Conv  Conv+Add+Relu                            NHWC8      wmma 32x64x64 w4 8x32x16 s3 (4.0 us; cuDNN IMPLICIT_GEMM fused 13.0 us)
     4  /layer1/layer1.1/conv1/Conv  Conv+Add+Relu                            NHWC8      wmma 32x64x64 w4 8x32x16 s3 (timed on an identical layer: 4.0 us; cuDNN 13.0 us)
     5  /features/features.2/conv/conv.2/Conv Conv                                     NHWC8      IMPLICIT_PRECOMP_GEMM fused tensor-op (timed on an identical layer: 2.0 us; best tcinfer kernel 3.5 us)
     6  /layer2/layer2.0/conv1/Conv  Conv+Relu                                NHWC8      wmma 64x64x32 w4 16x16x16 s4 (20.0 us; cuDNN IMPLICIT_GEMM fused 10.0 us)
"""

EXPECTED = """\
### test, batch 1: WMMA wins 3 of 5 convolutions; sum of per-layer times (in graphs): WMMA-only 0.044 ms, cuDNN-only 0.048 ms, chosen 0.040 ms

| step | layer | fused | best WMMA us | cuDNN us | chosen | kernel |
| --- | --- | --- | --- | --- | --- | --- |
| 0 | /conv1 | Conv+Relu | 12.5 | 10.0 | cuDNN | IMPLICIT_PRECOMP_GEMM fused tensor-op |
| 3 | /layer1/layer1.0/conv1 | Conv+Add+Relu | 4.0 | 13.0 | WMMA | wmma 32x64x64 w4 8x32x16 s3 |
| 4 | /layer1/layer1.1/conv1 | Conv+Add+Relu | 4.0 | 13.0 | WMMA | wmma 32x64x64 w4 8x32x16 s3 |
| 5 | features.2/conv/conv.2 | Conv | 3.5 | 2.0 | cuDNN | IMPLICIT_PRECOMP_GEMM fused tensor-op |
| 6 | /layer2/layer2.0/conv1 | Conv+Relu | 20.0 | 10.0 | WMMA | wmma 64x64x32 w4 16x16x16 s4 |
"""


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "info.txt")
        with open(good, "w", encoding="utf-8") as f:
            f.write(INFO)
        r = run("test, batch 1", good)
        assert r.returncode == 0, r.stderr
        assert r.stdout == EXPECTED, "got:\n" + r.stdout

        bad = os.path.join(tmp, "bad.txt")
        with open(bad, "w", encoding="utf-8") as f:
            f.write("     7  /x/Conv  Conv  NHWC8      someone else's kernel\n")
        r = run("bad", bad)
        assert r.returncode != 0 and "step 7: unrecognised kernel text" in r.stderr, r.stderr

        r = run("only a title")
        assert r.returncode != 0, "a title without a file must be refused"
    print("autotune_layers.py: 3 checks passed")


if __name__ == "__main__":
    main()

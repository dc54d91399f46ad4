#!/usr/bin/env python3
"""Plans ResNet-50 at batch 256 for the GPU without a GPU (`tcinfer --plan`) and checks that the
planned activation arena is at most a given share of the naive sum of all activations."""
import argparse
import os
import re
import subprocess
import sys


def main(argv):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tcinfer", required=True)
    p.add_argument("--models-dir", required=True)
    p.add_argument("--generator", required=True, help="models/generate.py")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--max-share", type=float, default=40.0, help="arena / naive, percent")
    args = p.parse_args(argv)
    model = os.path.join(args.models_dir, "resnet50.onnx")
    if not os.path.exists(model):
        subprocess.run([sys.executable, args.generator, "--resnet50", args.models_dir], check=True)
    proc = subprocess.run([args.tcinfer, "--plan", "--shape", f"input:{args.batch}x3x224x224",
                           model], capture_output=True, text=True)
    print(proc.stdout[:2000], proc.stderr, sep="")
    m = re.search(r"activation arena: ([\d.]+) MB \(naive sum of activations ([\d.]+) MB, "
                  r"([\d.]+)%\)", proc.stdout)
    if proc.returncode != 0 or not m:
        print("FAIL: no plan report")
        return 1
    share = float(m.group(3))
    ok = share <= args.max_share
    print(f"{'ok' if ok else 'FAIL'}: ResNet-50 batch {args.batch} arena {m.group(1)} MB is "
          f"{share}% of the naive {m.group(2)} MB (bound {args.max_share}%)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

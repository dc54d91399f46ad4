#!/usr/bin/env python3
"""scripts/check_layers.py on small made-up trees: a clean tree passes (includes by src/ path,
by the including file's folder, the public header, a generated header, system headers, a file
of exactly 1,000 lines); an upward include, a sideways one through "../", an include into src/
from cli, a file outside every layer, a 1,001-line file and an include of nothing each fail
with their line; a call without the root is a usage error."""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check_layers.py")

CLEAN = {
    "include/tcinfer.h": "/* public */\n",
    "src/util/status.h": "#include <stddef.h>\n#include \"tcinfer.h\"\n",
    "src/util/status.c": "#include \"util/status.h\"\n",
    "src/util/long.c": "int x;\n" * 1000,
    "src/kernels/act.cuh": "#include \"util/status.h\"\n",
    "src/kernels/eltwise.cu": "#include \"act.cuh\"\n#include \"kernels/act.cuh\"\n",
    "src/graph/ir.h": "#include \"util/status.h\"\n",
    "src/graph/ir.c": "#include \"graph/ir.h\"\n",
    "src/graph/lower.h": "#include \"ir.h\"\n",
    "src/onnx/loader.c": "#include \"graph/ir.h\"\n#include \"onnx.pb-c.h\"\n",
    "src/layers/op.h": "#include \"graph/ir.h\"\n#include \"graph/lower.h\"\n",
    "src/layers/conv.c": "#include \"op.h\"\n",
    "src/graph/passes.h": "#include \"graph/ir.h\"\n",
    "src/graph/passes/fold.c": "#include \"graph/passes.h\"\n#include \"layers/op.h\"\n",
    "src/graph/plan.h": "#include \"graph/passes.h\"\n",
    "src/graph/plan/build.c": "#include \"graph/plan.h\"\n",
    "src/graph/compare.c": "#include \"graph/ir.h\"\n",
    "src/graph/cpu/run.c": "#include \"graph/plan.h\"\n",
    "src/graph/gpu/run_step.c": "#include \"graph/plan.h\"\n#include \"kernels/act.cuh\"\n",
    "src/api/engine.c": "#include \"graph/gpu/../cpu/run.c\"\n#include \"onnx/loader.c\"\n",
    "src/cli/main.c": "#include <stdio.h>\n\n#include \"tcinfer.h\"\n",
}


def make_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, *path.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def check_tree(extra, expected_lines):
    """The clean tree plus extra fails with exactly expected_lines on stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        make_tree(tmp, {**CLEAN, **extra})
        r = run(tmp)
        got = r.stdout.splitlines()
        assert r.returncode == 1, f"exit {r.returncode}, expected 1; stdout:\n{r.stdout}"
        assert got == expected_lines, ("got:\n" + r.stdout + "expected:\n"
                                       + "\n".join(expected_lines))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        make_tree(tmp, CLEAN)
        r = run(tmp)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.endswith("no violations\n"), r.stdout

    check_tree({"src/util/bad.c": "#include <stdio.h>\n\n#include \"graph/ir.h\"\n"},
               ['src/util/bad.c:3: includes "graph/ir.h" (layer ir) from layer util'])
    check_tree({"src/kernels/bad.cu": "#include \"../layers/op.h\"\n"},
               ['src/kernels/bad.cu:1: includes "../layers/op.h" (layer layers) from layer '
                'kernels'])
    check_tree({"src/cli/main.c": "#include \"tcinfer.h\"\n#include \"util/status.h\"\n"},
               ['src/cli/main.c:2: includes "util/status.h" (layer util) from layer cli'])
    # the library prints nothing: stdout / stderr and printf-like calls outside cli fail; in
    # comments, strings and the cli, and fprintf to a file, they pass
    check_tree({"src/layers/loud.c": "/* printf(x) */\nint f(void) {\n  fprintf(stderr, \"x\");\n"
                                     "  return printf(\"%d\", 1);\n}\n",
                "src/kernels/loud.cu": "__global__ void k() { printf(\"stdout\"); }\n"},
               ["src/kernels/loud.cu:1: prints (printf): the library reports through the log "
                "callback and tci_last_error",
                "src/layers/loud.c:3: prints (stderr): the library reports through the log "
                "callback and tci_last_error",
                "src/layers/loud.c:4: prints (printf): the library reports through the log "
                "callback and tci_last_error"])
    check_tree({"src/util/quiet.c": "/* no printf( here,\n stderr */ int f(FILE *f) {\n"
                                    "  return fprintf(f, \"puts(stdout)\") + sprintf(0, \"\");\n}\n",
                "src/cli/main.c": "#include \"tcinfer.h\"\nint g(void) { return printf(\"\"); }\n",
                "src/graph/exec_gpu.c": "#include \"graph/plan.h\"\n"},
               ["src/graph/exec_gpu.c: not in any layer: add it to the table in "
                "scripts/check_layers.py"])
    check_tree({"src/layers/big.c": "int x;\n" * 1000 + "int y;"},
               ["src/layers/big.c: 1001 lines, over the limit of 1000"])
    check_tree({"src/graph/ir.c": "#include \"graph/irr.h\"\n"},
               ['src/graph/ir.c:1: includes "graph/irr.h", which is no file under src/ or '
                'include/ and no generated header'])

    r = run()
    assert r.returncode == 2 and "usage" in r.stderr, r.stderr
    print("check_layers.py: 8 checks passed")


if __name__ == "__main__":
    main()

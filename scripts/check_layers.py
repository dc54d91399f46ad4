#!/usr/bin/env python3
"""The include-layer rule of src/ (docs/design.md, "Layers"), checked.

usage: scripts/check_layers.py PROJECT_ROOT

Every file under src/ belongs to exactly one layer of LAYERS. A source file (.c .h .cu .cuh)
may `#include "..."` only headers of its own layer and of the layers its row lists; the public
header include/tcinfer.h and system headers (<...>) are allowed everywhere. No source file
under src/ is over MAX_LINES lines. The library prints nothing by itself (its messages go to
the log callback of tci_engine_options): outside the layers of PRINTING_LAYERS no source file
names stdout or stderr or calls printf, puts, putchar, perror or vprintf (comments and string
literals aside; fprintf to a file it opened is fine). Prints one line per violation and exits 1 if there is any;
exits 0 when the tree is clean, 2 on a usage error. Python 3 standard library only.
"""
import fnmatch
import os
import re
import sys

# The layers, bottom to top: (name, what it covers, the other layers it may include).
# A cover ending in "/" is a folder and everything below it; any other cover is a path
# relative to the project root whose file name may hold a shell pattern (ir.* is ir.c and ir.h).
LAYERS = [
    ("util", ["src/util/"], []),
    ("kernels", ["src/kernels/"], ["util"]),
    ("ir", ["src/graph/ir.*", "src/graph/lower.h"], ["util"]),
    ("onnx", ["src/onnx/"], ["ir", "util"]),
    ("layers", ["src/layers/"], ["ir", "util"]),
    ("passes", ["src/graph/passes/", "src/graph/passes.h"], ["layers", "ir", "util"]),
    ("plan", ["src/graph/plan/", "src/graph/plan.h"], ["passes", "layers", "ir", "util"]),
    ("compare", ["src/graph/compare.*"], ["ir", "util"]),
    ("cpu", ["src/graph/cpu/"], ["plan", "passes", "layers", "ir", "util"]),
    ("gpu", ["src/graph/gpu/"], ["plan", "layers", "ir", "util", "kernels"]),
    ("api", ["src/api/"], ["gpu", "cpu", "compare", "plan", "passes", "layers", "onnx", "ir",
                           "kernels", "util"]),
    ("cli", ["src/cli/"], []),
]

# Headers generated at build time (not in the tree) and the layer they belong to.
GENERATED = {"onnx.pb-c.h": "onnx"}  # protobuf-c bindings of onnx.proto

# The layers that may write to stdout / stderr: the command line's.
PRINTING_LAYERS = {"cli"}
PRINTING = re.compile(r"\b(?:stdout|stderr)\b|\b(?:printf|vprintf|puts|putchar|perror)\s*\(")
# comments and string / character literals, blanked before looking for PRINTING
NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)

PUBLIC_HEADER = "include/tcinfer.h"
MAX_LINES = 1000
SOURCE_EXTENSIONS = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def layer_of(path, layers=LAYERS):
    """The names of the layers whose covers hold path (relative, '/'-separated)."""
    found = []
    folder, name = path.rsplit("/", 1) if "/" in path else ("", path)
    for layer, covers, _ in layers:
        for cover in covers:
            if cover.endswith("/"):
                hit = path.startswith(cover)
            else:
                cover_folder, cover_name = cover.rsplit("/", 1) if "/" in cover else ("", cover)
                hit = folder == cover_folder and fnmatch.fnmatchcase(name, cover_name)
            if hit:
                found.append(layer)
                break
    return found


def check_table(layers):
    names = [layer for layer, _, _ in layers]
    errors = []
    for layer, _, allowed in layers:
        for other in allowed:
            if other not in names:
                errors.append(f"check_layers.py: layer {layer} may include unknown layer {other}")
    if len(set(names)) != len(names):
        errors.append("check_layers.py: a layer name appears twice in LAYERS")
    return errors


def files_under(root, top):
    """Every file below root/top, as '/'-separated paths relative to root, hidden ones left out."""
    out = []
    for folder, dirs, files in os.walk(os.path.join(root, top)):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            if not f.startswith("."):
                out.append(os.path.relpath(os.path.join(folder, f), root).replace(os.sep, "/"))
    return out


def resolve(root, including, target):
    """The root-relative path an `#include "target"` in file `including` names, or None: as the
    compiler looks, the including file's folder first, then the include roots src/ and include/."""
    folders = [os.path.dirname(including), "src", "include"]
    for folder in folders:
        path = os.path.normpath(os.path.join(folder, target)).replace(os.sep, "/")
        if not path.startswith("../") and os.path.isfile(os.path.join(root, path)):
            return path
    return None


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def line_count(text):
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def check(root, layers=LAYERS):
    """The violations in the tree at root, one message each."""
    errors = check_table(layers)
    allowed = {layer: {layer, *others} for layer, _, others in layers}
    for path in files_under(root, "src"):
        own = layer_of(path, layers)
        if not own:
            errors.append(f"{path}: not in any layer: add it to the table in "
                          f"scripts/check_layers.py")
        elif len(own) > 1:
            errors.append(f"{path}: in more than one layer ({', '.join(own)}): fix the table in "
                          f"scripts/check_layers.py")
        if not path.endswith(SOURCE_EXTENSIONS):
            continue
        text = read_text(os.path.join(root, path))
        lines = line_count(text)
        if lines > MAX_LINES:
            errors.append(f"{path}: {lines} lines, over the limit of {MAX_LINES}")
        if len(own) != 1:
            continue  # reported above; its includes cannot be judged
        if own[0] not in PRINTING_LAYERS:
            code = NOT_CODE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
            for number, line in enumerate(code.splitlines(), 1):
                m = PRINTING.search(line)
                if m:
                    errors.append(f"{path}:{number}: prints ({m.group(0).rstrip('( ')}): the "
                                  f"library reports through the log callback and tci_last_error")
        for number, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            header = resolve(root, path, target)
            if header == PUBLIC_HEADER:
                continue
            if header is None:
                if target in GENERATED:
                    theirs = GENERATED[target]
                else:
                    errors.append(f'{path}:{number}: includes "{target}", which is no file under '
                                  f"src/ or include/ and no generated header")
                    continue
            elif header.startswith("src/"):
                found = layer_of(header, layers)
                if len(found) != 1:
                    continue  # the header itself is reported as not in (or in two) layers
                theirs = found[0]
            else:
                errors.append(f'{path}:{number}: includes "{target}" ({header}), which is '
                              f"outside src/ and not the public header")
                continue
            if theirs not in allowed[own[0]]:
                errors.append(f'{path}:{number}: includes "{target}" (layer {theirs}) from layer '
                              f"{own[0]}")
    return errors


def main(argv):
    if len(argv) != 2:
        print("usage: check_layers.py PROJECT_ROOT", file=sys.stderr)
        return 2
    root = argv[1]
    if not os.path.isdir(os.path.join(root, "src")):
        print(f"check_layers.py: {root} has no src/ folder", file=sys.stderr)
        return 2
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers.py: {len(errors)} violations", file=sys.stderr)
        return 1
    print(f"check_layers.py: {len(files_under(root, 'src'))} files in {len(LAYERS)} layers, "
          f"no violations")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

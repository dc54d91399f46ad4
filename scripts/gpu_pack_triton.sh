#!/usr/bin/env bash
# Packs what bench/triton_gpu.py needs on the GPU machine beside scripts/gpu_pack.sh's
# .gpu/all.tar.xz (which holds the backend and the libcJSON it links), each under the call's
# 64 MiB with it:
#   .gpu/tritonpack.tar.xz     the server of the pinned nvidia-pytriton in .venv: bin/tritonserver
#                              and nvidia_pytriton.libs/ without the two libraries the server does
#                              not link (libpython3 for Python-backend stubs, libarchive): ~26 MB
#   .gpu/perf_analyzer.tar.xz  .venv/perf_analyzer (scripts/setup.sh unpacks it): ~5 MB
#   .gpu/pyclient2.tar.xz      tritonclient and its HTTP dependencies, unpacked wheels for the
#                              GPU machine's Python 3.12 from PyPI (grpc and numpy are there): ~5 MB
# usage: scripts/gpu_pack_triton.sh   (after `make setup`; then docs/serving.md's command)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
[ -x "$site/pytriton/tritonserver/bin/tritonserver" ] && [ -x .venv/perf_analyzer/bin/perf_analyzer ] ||
    { echo "no server or perf_analyzer in .venv: run make setup" >&2; exit 1; }
mkdir -p .gpu
tar -C "$site" -cf - --exclude='libpython3*' --exclude='libarchive*' pytriton/__init__.py \
    pytriton/tritonserver/bin pytriton/tritonserver/caches nvidia_pytriton.libs |
    xz -T2 -6 > .gpu/tritonpack.tar.xz
tar -C .venv -cJf .gpu/perf_analyzer.tar.xz perf_analyzer
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# tests/requirements.txt's client; its HTTP dependencies at the versions resolved on 2026-12-03
.venv/bin/pip download --quiet --only-binary=:all: --no-deps --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$stage/whl" tritonclient==2.73.0 \
    geventhttpclient==2.6.1 gevent==26.9.0 python-rapidjson==1.25 urllib3==2.8.0 \
    greenlet==3.5.6 zope.event==6.2 zope.interface==8.7 brotli==1.2.1 certifi==2026.10.19.post1
mkdir "$stage/py"
for w in "$stage"/whl/*.whl; do .venv/bin/python -m zipfile -e "$w" "$stage/py/"; done
tar -C "$stage/py" -cJf .gpu/pyclient2.tar.xz .
ls -l .gpu/tritonpack.tar.xz .gpu/perf_analyzer.tar.xz .gpu/pyclient2.tar.xz

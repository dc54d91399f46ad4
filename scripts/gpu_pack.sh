#!/usr/bin/env bash
# Packs a CUDA build for the GPU machine, whose calls carry at most 64 MiB, into one archive,
# .gpu/all.tar.xz: the CLI, the examples and the shared library they link, the kernel benchmarks,
# the Triton backend and the GPU test binaries (TEST_NAME_REGEX picks them; default: all). Each
# binary holds the same kernels (~45 MB stripped), so xz runs with a dictionary that spans several
# of them: the ~20 binaries of a full build come to about 20 MB. .gpu/ is ignored by git.
#   usage: scripts/gpu_pack.sh BUILD [TEST_NAME_REGEX]
# Then, on the GPU machine: scripts/gpu_call.sh (see there).
set -euo pipefail
build=${1:?build folder}
only=${2:-.}
root="$(cd "$(dirname "$0")/.." && pwd)"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$root/.gpu" "$stage/new/tests/gpu" "$stage/new/triton_backends/tcinfer"
cp "$build/tcinfer" "$stage/new/"
for example in example_async_stream example_server_pool; do
    find "$build" -name $example -type f -exec cp {} "$stage/new/" \; -quit
done
cp -L "$build/libtcinfer.so.0" "$stage/new/" 2>/dev/null || true
# the kernel benchmarks (tcinfer_bench_gemm, tcinfer_bench_attention) where built
find "$build" -maxdepth 1 -name 'tcinfer_bench_*' -type f -exec cp {} "$stage/new/" \;
find "$build" -name libtriton_tcinfer.so -type f \
    -exec cp {} "$stage/new/triton_backends/tcinfer/" \; -quit
# the GPU machine has no libcJSON, which the backend links: beside the CLI, on the
# LD_LIBRARY_PATH of docs/serving.md's command
backend=$(find "$stage/new/triton_backends/tcinfer" -name libtriton_tcinfer.so)
if [ -n "$backend" ]; then
    cjson=$(ldd "$backend" | awk '$1 == "libcjson.so.1" { print $3 }')
    [ -n "$cjson" ] && cp -L "$cjson" "$stage/new/"
fi
find "$build/tests/gpu" -maxdepth 1 -name 'gpu_test_*' -type f | grep -E "$only" |
    xargs -r cp -t "$stage/new/tests/gpu/"
find "$stage" -type f -exec strip {} + 2>/dev/null || true
tar -C "$stage" -cf - new | xz -T1 --lzma2=preset=3,dict=512MiB > "$root/.gpu/all.tar.xz"
ls -l "$root/.gpu/all.tar.xz"

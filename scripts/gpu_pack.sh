#!/usr/bin/env bash
# Packs a CUDA build for the GPU machine, whose calls carry at most 64 MiB: the CLI and the GPU
# examples in .gpu/base.tar.xz (~13 MB), the shared library and the Triton backend in
# .gpu/extra.tar.xz (~26 MB), the GPU test binaries (each links the whole library statically:
# ~27 MB stripped, ~3 MB more each in one archive) in .gpu/tests1.tar.xz and .gpu/tests2.tar.xz.
# A call carries base and one of the others. .gpu/ is ignored by git.
#   usage: scripts/gpu_pack.sh BUILD [TEST_NAME_REGEX]   (default: every gpu_test_*)
# Then, on the GPU machine: scripts/gpu_call.sh (see there).
set -euo pipefail
build=${1:?build folder}
only=${2:-.}
root="$(cd "$(dirname "$0")/.." && pwd)"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$root/.gpu" "$stage/base/new" "$stage/extra/new" "$stage/tests1/new/tests/gpu" \
    "$stage/tests2/new/tests/gpu"
cp "$build/tcinfer" "$stage/base/new/"
for example in example_async_stream example_server_pool; do
    find "$build" -name $example -type f -exec cp {} "$stage/base/new/" \; -quit
done
cp -L "$build/libtcinfer.so.0" "$stage/extra/new/" 2>/dev/null || true
find "$build" -name libtriton_tcinfer.so -type f -exec cp {} "$stage/extra/new/" \; -quit
mapfile -t tests < <(find "$build/tests/gpu" -maxdepth 1 -name 'gpu_test_*' -type f | sort | grep -E "$only")
half=$(((${#tests[@]} + 1) / 2))
for i in "${!tests[@]}"; do
    part=$([ "$i" -lt "$half" ] && echo tests1 || echo tests2)
    cp "${tests[$i]}" "$stage/$part/new/tests/gpu/"
done
for part in base extra tests1 tests2; do
    find "$stage/$part" -type f -exec strip {} + 2>/dev/null || true
    # one thread: xz's block splitting would lose the matches between the test binaries
    tar -C "$stage/$part" -cf - new | xz -9 -T1 > "$root/.gpu/$part.tar.xz" &
done
wait
ls -l "$root"/.gpu/*.tar.xz

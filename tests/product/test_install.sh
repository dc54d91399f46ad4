#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it from outside the tree: the exported
# symbols and soname of libtcinfer.so, a program built through pkg-config (shared and static) and
# through find_package (tcinfer::tcinfer, tcinfer::tcinfer_static), each run on the demo model,
# and a parent project that takes tcinfer in by add_subdirectory (configured).
#
#   test_install.sh BUILD_DIR SOURCE_DIR C_COMPILER TCI_CUDA(ON|OFF)
set -euo pipefail
build=$1 src=$2 cc=$3 cuda=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
demo=$src/models/demo

cmake --install "$build" --prefix "$prefix" >/dev/null
so=$(find "$prefix" -name 'libtcinfer.so.*.*.*' | head -1)
libdir=$(dirname "$so")
for f in "$libdir/libtcinfer.a" "$libdir/libtcinfer.so" "$prefix/include/tcinfer.h" \
         "$prefix/bin/tcinfer" "$libdir/pkgconfig/tcinfer.pc" "$libdir/cmake/tcinfer/tcinferConfig.cmake"; do
    [ -e "$f" ] || { echo "FAIL: not installed: ${f#$prefix/}"; exit 1; }
done
echo "installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

# soname and exports: the tci_* functions of the header, nothing else
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libtcinfer.so.0" ] || { echo "FAIL: soname '$soname'"; exit 1; }
exported=$(nm -D --defined-only "$so" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' | sort)
others=$(echo "$exported" | grep -v '^tci_' || true)
[ -z "$others" ] || { echo "FAIL: exported besides tci_*: $(echo $others | head -c 600)"; exit 1; }
declared=$(sed 's://.*$::' "$src/include/tcinfer.h" | grep -oE '\btci_[a-z0-9_]+\s*\(' |
           sed 's/\s*($//' | sort -u)
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
[ -z "$missing" ] || { echo "FAIL: declared in tcinfer.h, not exported: $missing"; exit 1; }
echo "libtcinfer.so: soname $soname, $(echo "$exported" | wc -l) symbols exported, all tci_*"

run() { # a built program on the demo model
    out=$("$@" "$demo/tiny_cnn.onnx" "$demo/input.npy")
    echo "$out" | grep -q "row 0 top-5:  class 6" || { echo "FAIL: $1: $out"; exit 1; }
}

# pkg-config, shared and static
export PKG_CONFIG_PATH=$libdir/pkgconfig
"$cc" -std=c11 -Wall -Werror "$src/examples/classify.c" -o "$tmp/classify_pc" \
    $(pkg-config --cflags --libs tcinfer) -Wl,-rpath,"$libdir"
run "$tmp/classify_pc"
"$cc" -std=c11 -Wall -Werror "$src/examples/classify.c" -o "$tmp/classify_pc_static" \
    $(pkg-config --cflags tcinfer) \
    $(pkg-config --static --libs tcinfer | sed "s|-ltcinfer\b|$libdir/libtcinfer.a|")
if readelf -d "$tmp/classify_pc_static" | grep -q 'libtcinfer'; then
    echo "FAIL: the static link took libtcinfer.so"; exit 1
fi
run "$tmp/classify_pc_static"
echo "pkg-config: $(pkg-config --libs tcinfer) | static: $(pkg-config --static --libs tcinfer)"

# find_package
cmake -S "$src/tests/product/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DTCI_EXAMPLES="$src/examples" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
run "$tmp/consumer/classify_shared"
run "$tmp/consumer/classify_static"
echo "find_package(tcinfer): tcinfer::tcinfer and tcinfer::tcinfer_static built and ran"

# add_subdirectory (configure only: the library's build is the same as this one's)
cmake -S "$src/tests/product/parent" -B "$tmp/parent" -DTCI_SOURCE="$src" -DTCI_CUDA="$cuda" \
    -DCMAKE_C_COMPILER="$cc" >/dev/null
echo "add_subdirectory: configured in a parent project"
"$prefix/bin/tcinfer" --version
echo "PASS"

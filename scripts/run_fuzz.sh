#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS seconds on a corpus seeded from the project's models
# and tensor files (make fuzz SECONDS=N; docs/robustness.md). Crashes land in
# BUILD/fuzz/artifacts/<target>/ and make the script fail.
#   usage: scripts/run_fuzz.sh BUILD SECONDS [TARGET...]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"; secs="$2"; shift 2
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_model fuzz_gpu_plan fuzz_tensor fuzz_engine_file)
py="$root/.venv/bin/python"; [ -x "$py" ] || py=python3

# the malformed corpus (tests/malformed/make_corpus.py) joins the seeds
malformed="$build/fuzz/malformed"
[ -f "$malformed/cases.tsv" ] || "$py" "$root/tests/malformed/make_corpus.py" "$malformed" >/dev/null

seed() { # target dir
    local t="$1" d="$2"
    mkdir -p "$d"
    case "$t" in
    fuzz_model|fuzz_gpu_plan) # and the generated models, their weights made by ConstantOfShape
        find "$root/models" "$root/tests/data" "$malformed" -type f -name '*.onnx' -size -256k \
            -exec cp -t "$d" {} + 2>/dev/null
        [ -d "$build/fuzz/generated" ] ||
            "$py" "$root/models/generate.py" "$build/fuzz/generated" >/dev/null
        "$py" "$root/tests/fuzz/shrink_models.py" "$build/fuzz/generated" "$d" ;;
    fuzz_tensor) # first byte: 0 .npy, 1 .pb
        local i=0
        while IFS= read -r f; do
            case "$f" in *.npy) printf '\0' ;; *) printf '\1' ;; esac > "$d/seed_$i"
            cat "$f" >> "$d/seed_$i"; i=$((i + 1))
        done < <(find "$root/models" "$root/tests/data" "$malformed" -type f \
                      \( -name '*.npy' -o -name '*.pb' \) -size -64k 2>/dev/null) ;;
    fuzz_engine_file) # payloads: the records of an engine file around a small model
        "$py" - "$d" "$root/models/demo/tiny_cnn.onnx" <<'PY'
import struct, sys
d, model = sys.argv[1], open(sys.argv[2], "rb").read()
def rec(tag, b): return struct.pack("<IQ", tag, len(b)) + b
p = (rec(1, b"GPU X\tsm_90") + rec(2, b"tcinfer 0.2.0") + rec(3, struct.pack("<ii", 0, 0)) +
     rec(4, b"conv1\0") + rec(5, model) + rec(6, b"w\0") + rec(7, b"conv 1 2 3\n"))
open(d + "/payload", "wb").write(p)
PY
        ;;
    esac
}

fail=0
for t in "${targets[@]}"; do
    bin="$build/fuzz/$t"
    [ -x "$bin" ] || { echo "run_fuzz: $bin is not built" >&2; exit 2; }
    corpus="$build/fuzz/corpus/$t"; art="$build/fuzz/artifacts/$t/"
    [ -d "$corpus" ] || seed "$t" "$corpus"
    mkdir -p "$art"
    echo "== $t: $secs s, corpus $(ls "$corpus" | wc -l) files"
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=25 \
               -max_len=262144 -print_final_stats=1 -artifact_prefix="$art" "$corpus" \
        > "$build/fuzz/$t.log" 2>&1
    rc=$?
    grep -E '^(stat::|#[0-9]+ +DONE)' "$build/fuzz/$t.log" | sed "s/^/  /"
    if [ $rc -ne 0 ]; then
        echo "run_fuzz: $t failed (exit $rc); see $build/fuzz/$t.log and $art" >&2
        fail=1
    fi
done
exit $fail

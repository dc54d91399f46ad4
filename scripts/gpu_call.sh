#!/usr/bin/env bash
# One call on the GPU machine (run from the repository root there): unpacks what
# scripts/gpu_pack.sh left in .gpu/ (the call carries .gpu/all.tar.xz), then
#   SUITE_PAT=REGEX   the GPU suite parts matching REGEX (scripts/gpu_suite.sh), in the background,
#                     cut after SUITE_S seconds (default 530);
#   ACC_S=SECONDS     the zoo's accuracy phase, ACC_PROCS processes sharing the GPU beside it;
#   BENCH_S=SECONDS   then the zoo's timing phase alone on the GPU (BENCH_ONLY: names);
# each zoo phase resuming from the result files in .gpu/prev. Everything lands in $OUT: the suite
# log, the zoo logs, zoo.md and zoo.tar (the result files, for .gpu/prev of the next call).
set -u
export PYTHONUNBUFFERED=1
T=/tmp/tci
mkdir -p $T
tar -C $T -xJf .gpu/all.tar.xz
NEW=$T/new/tcinfer R=$OUT/zoo
mkdir -p "$R"
[ -d .gpu/prev ] && cp .gpu/prev/*.json "$R/" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
suite_pid=""
if [ -n "${SUITE_PAT:-}" ]; then
    (timeout "${SUITE_S:-530}" bash scripts/gpu_suite.sh $T/new $T/work "$SUITE_PAT"
     if [ -x $T/new/example_async_stream ]; then
         echo "=== example async_stream"
         # (links new/libtcinfer.so.0)
         LD_LIBRARY_PATH=$T/new:/usr/local/cuda/lib64 $T/new/example_async_stream \
             models/demo/tiny_cnn.onnx models/demo/input.npy
         echo "async_stream rc $?"
     fi) > "$OUT/suite.log" 2>&1 &
    suite_pid=$!
fi
acc_pids=()
if [ "${ACC_S:-0}" != 0 ]; then
    export OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2
    n=${ACC_PROCS:-3}
    for i in $(seq 1 "$n"); do
        timeout $((ACC_S + 90)) python3 bench/zoo.py --tcinfer $NEW --work $T/zoo --results "$R" \
            --jobs "${JOBS:-4}" --phase acc --resume --part "$i/$n" --deadline "$ACC_S" \
            > "$OUT/acc$i.log" 2>&1 &
        acc_pids+=($!)
    done
    wait "${acc_pids[@]}"
    echo "acc rows: $(cat "$OUT"/acc*.log | grep -c '(export')"
fi
[ -n "$suite_pid" ] && wait "$suite_pid"
[ -f "$OUT/suite.log" ] && grep -E "^FAILED|gpu suite:|async_stream rc|conformance:" "$OUT/suite.log"
if [ "${BENCH_S:-0}" != 0 ]; then
    timeout $((BENCH_S + 60)) python3 bench/zoo.py --tcinfer $NEW --work $T/zoo --results "$R" \
        --jobs 12 --phase bench --resume ${BENCH_ONLY:+--only "$BENCH_ONLY"} \
        --iters "${ITERS:-20}" --deadline "$BENCH_S" > "$OUT/bench.log" 2>&1
    echo "bench rows: $(grep -c '(export' "$OUT/bench.log")"
fi
python3 bench/zoo.py --results "$R" --report "$OUT/zoo.md" > /dev/null 2>&1
grep "^Correct" "$OUT/zoo.md"
tar -C "$OUT" -cf "$OUT/zoo.tar" zoo && rm -rf "$R"

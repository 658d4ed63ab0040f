#!/usr/bin/env bash
# foveal on a GPU, in one go: the cuda tests, two recipes trained with loop.device=cuda, and the compiled
# training steps against eager (inductor's plain graphs, then replayed as CUDA graphs).
#
#     OUT=runs/cuda bash benchmarks/cuda.sh
#
# Runs from the repository root with foveal installed or on PYTHONPATH. Each stage has its own time limit,
# so a stage that hangs or fails leaves the others' results; everything lands in $OUT.
set -u
OUT=${OUT:-runs/cuda}
mkdir -p "$OUT"
export PYTHONPATH="src:benchmarks${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
"$PY" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$OUT/gpu.txt"

# Stage 1, side by side: the tests, and two recipes trained on the GPU (their wall times share the machine).
timeout 200 "$PY" -m pytest -m cuda tests/test_cuda.py -p no:cacheprovider -o addopts="" -q -rs >"$OUT/tests.txt" 2>&1 &
tests=$!
timeout 200 "$PY" -m foveal train ntm-copy --preset full --set loop.device=cuda --out "$OUT/ntm-copy" --overwrite \
    >"$OUT/ntm-copy.txt" 2>&1 &
ntm=$!
timeout 200 "$PY" -m foveal train shapes-vqa --preset quick --set loop.device=cuda --out "$OUT/shapes-vqa" --overwrite \
    >"$OUT/shapes-vqa.txt" 2>&1
wait $ntm $tests
tail -n 25 "$OUT/tests.txt"
for run in ntm-copy shapes-vqa; do
    echo "== $run"
    grep -E "compile|eval|bits|acc|seconds" "$OUT/$run.txt" | tail -n 6
    cp "$OUT/$run/metrics.jsonl" "$OUT/$run-metrics.jsonl" 2>/dev/null
done

# Stage 2, alone on the GPU: the compiled training step against eager.
timeout 200 "$PY" benchmarks/compile.py --device cuda --rounds 10 --out "$OUT/compile-cuda.jsonl"
timeout 130 "$PY" benchmarks/compile.py --device cuda --mode reduce-overhead --rounds 10 \
    --only ntm-copy,shapes-vqa,draw-paper --out "$OUT/compile-cuda.jsonl"

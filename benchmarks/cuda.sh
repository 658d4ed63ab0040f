#!/usr/bin/env bash
# foveal on a GPU, in one go: the cuda tests, the compiled training steps against eager (inductor's plain
# graphs, replayed as CUDA graphs, and without foveal's graph pass), then two recipes trained with
# loop.device=cuda.
#
#     OUT=runs/cuda bash benchmarks/cuda.sh
#     OUT=results/cuda ONLY_TESTS=1 bash benchmarks/cuda.sh    # the tests alone, logged beside the results
#
# Runs from the repository root with foveal installed or on PYTHONPATH. Each stage has its own time limit,
# so a stage that hangs or fails leaves the others' results; everything lands in $OUT. The stages run one
# after another, so no timing shares the GPU, and the most wanted come first: on a machine lent for a few
# minutes, the recipes at the end are the first thing to give up.
set -u
OUT=${OUT:-runs/cuda}
mkdir -p "$OUT"
export PYTHONPATH="src:benchmarks${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
"$PY" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$OUT/gpu.txt"

# The tests: recipes' steps against the CPU, compiled against eager, the graph pass, the guarantees through every
# SDPA kernel, the sampler and the NTM's addressing. All they print is kept in tests-output.txt, and their
# summary line is added to tests.txt (with OUT=results/cuda, the log of every run).
timeout 300 "$PY" -m pytest -m cuda tests/test_cuda.py -p no:cacheprovider -o addopts="" -v -rsx >"$OUT/tests-output.txt" 2>&1
grep -E "PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR|passed|failed" "$OUT/tests-output.txt"
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "a copy without git")
echo "pytest -m cuda tests/test_cuda.py ($COMMIT): $(tail -n 1 "$OUT/tests-output.txt" | tr -d '=' | sed 's/^ *//')" \
    | tee -a "$OUT/tests.txt"
# ONLY_TESTS=1 stops here (a machine lent for a few minutes)
[ "${ONLY_TESTS:-0}" = 1 ] && exit 0

# Attention through the CUDA kernels SDPA picks (empty rows, NaN padding, 16 bits), then foveal's attention
# against SDPA, nn.MultiheadAttention and timm's layer in bfloat16 (results/cuda/attention-speed.jsonl)
timeout 90 "$PY" -m pytest -m cuda tests/attention/test_cuda_attention.py -p no:cacheprovider -o addopts="" -q -rs \
    >"$OUT/attention-tests.txt" 2>&1
tail -n 3 "$OUT/attention-tests.txt"
timeout 120 "$PY" benchmarks/attention.py --device cuda --repeats 2 --budget 0.5 --out "$OUT/attention-speed.jsonl" \
    | tee "$OUT/attention-speed.txt"

# The compiled training step against eager; a fresh machine's inductor cache is empty, so --cold says so
CASES=ntm-copy,draw-paper,shapes-vqa
timeout 180 "$PY" benchmarks/compile.py --device cuda --cold --rounds 10 --only "$CASES" --out "$OUT/compile-cuda.jsonl"
timeout 130 "$PY" benchmarks/compile.py --device cuda --cold --mode reduce-overhead --rounds 10 --only "$CASES" \
    --out "$OUT/compile-cuda.jsonl"
timeout 90 "$PY" benchmarks/compile.py --device cuda --cold --graph-pass off --rounds 10 --only ntm-copy,draw-paper \
    --out "$OUT/compile-cuda.jsonl"

# Two recipes trained on the GPU; their run folders (checkpoints) stay out of $OUT, their logs and metrics in it
RUNS=${RUNS:-$(mktemp -d)}
for run in "ntm-copy --preset full" "shapes-vqa --preset quick"; do
    name=${run%% *}
    timeout 150 "$PY" -m foveal train $run --set loop.device=cuda --out "$RUNS/$name" --overwrite >"$OUT/$name.txt" 2>&1
    echo "== $name"
    grep -E "compile|eval|bits|acc|seconds" "$OUT/$name.txt" | tail -n 6
    cp "$RUNS/$name/metrics.jsonl" "$OUT/$name-metrics.jsonl" 2>/dev/null
done

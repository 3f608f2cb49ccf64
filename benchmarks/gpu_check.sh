#!/usr/bin/env bash
# One device-machine session for the CUDA backend: environment facts, the GPU tests, the
# equivalence suite on the default (CUDA) backend, then the kernel benchmark. Logs go to $OUT.
# Usage (device machine, repo root): bash benchmarks/gpu_check.sh [cuda-tests-s] [equivalence-s] [bench-s]
# A limit of 0 skips that part. Timeouts send SIGINT so pytest still prints its failure summary.
set -u
OUT=${OUT:-/tmp/lf_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T_CUDA=${1:-200}
T_EQ=${2:-150}
T_BENCH=${3:-180}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, cupy; print(sys.version); print('cupy', cupy.__version__, 'cuda', cupy.cuda.runtime.runtimeGetVersion())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
PYTEST="python3 -m pytest -q -n 8 -p no:cacheprovider -p no:benchmark -rf --tb=short --timeout=90"
if [ "$T_CUDA" != 0 ]; then
  timeout -s INT -k 20 "$T_CUDA" $PYTEST tests/test_cuda.py tests/test_cuda_render.py > "$OUT/pytest_cuda.log" 2>&1
  echo "cuda tests rc=$?" | tee -a "$OUT/pytest_cuda.log"
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_cuda.log" | tail -n 40
fi
if [ "$T_EQ" != 0 ]; then
  timeout -s INT -k 20 "$T_EQ" $PYTEST tests/test_numpy_equivalence.py > "$OUT/pytest_equivalence.log" 2>&1
  echo "equivalence (default backend cuda) rc=$?" | tee -a "$OUT/pytest_equivalence.log"
  grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_equivalence.log" | tail -n 40
fi
if [ "$T_BENCH" != 0 ]; then
  timeout -s INT "$T_BENCH" python3 benchmarks/cuda_kernels.py --out "$OUT" > "$OUT/bench.log" 2>&1
  echo "bench rc=$?" | tee -a "$OUT/bench.log"
  tail -n 30 "$OUT/bench.log"
fi

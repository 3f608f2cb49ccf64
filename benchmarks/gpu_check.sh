#!/usr/bin/env bash
# One device-machine session for the CUDA backend: environment facts, the GPU tests, the
# equivalence suite on the default (CUDA) backend, then the kernel benchmark. Logs go to $OUT.
# Usage (on the device machine, repo root): bash benchmarks/gpu_check.sh [pytest-timeout-s] [bench-timeout-s]
set -u
OUT=${OUT:-/tmp/lf_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T_TEST=${1:-300}
T_BENCH=${2:-180}
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import sys, cupy; print(sys.version); print('cupy', cupy.__version__, 'cuda', cupy.cuda.runtime.runtimeGetVersion())"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
timeout "$T_TEST" python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_cuda.py tests/test_cuda_render.py \
  tests/test_numpy_equivalence.py -rfs --tb=short > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" | tee -a "$OUT/pytest.log"
tail -n 60 "$OUT/pytest.log"
timeout "$T_BENCH" python3 benchmarks/cuda_kernels.py --out "$OUT" > "$OUT/bench.log" 2>&1
echo "bench rc=$?" | tee -a "$OUT/bench.log"
tail -n 45 "$OUT/bench.log"

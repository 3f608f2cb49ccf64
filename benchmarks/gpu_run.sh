#!/usr/bin/env bash
# One device-machine call that checks the CUDA path end to end and measures the models:
# GPU tests, the Llama-1B random-weight TTFT/TPOT (bf16, fp32) and the DLRM sweep, each under a
# time cap, logs and JSON under $OUT. Usage (device machine, repo root, egglog installed):
#   bash benchmarks/gpu_run.sh [tests-s] [llama-s] [dlrm-s] [search-graphs] [anchors-s] [profile-s]
# With the peers' anchor scripts copied into .anchors/ (from ../shared/anchors), they run last in
# the same call, so the ratios compare figures of one run.
set -u
OUT=${OUT:-/tmp/lf_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 LUMINAL_CACHE_DIR=/tmp/lf_cache
T_TESTS=${1:-120}
T_LLAMA=${2:-200}
T_DLRM=${3:-90}
GRAPHS=${4:-3}
T_ANCH=${5:-0}
T_PROF=${6:-0}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv;
  python3 -c "import sys, cupy, egglog; print(sys.version.split()[0], 'cupy', cupy.__version__)"; } 2>&1 | tee "$OUT/env.txt"
if [ "$T_TESTS" != 0 ]; then
  timeout -s INT -k 15 "$T_TESTS" python3 -m pytest -q -n 8 -p no:cacheprovider -p no:benchmark -rf --tb=short \
    tests/test_cuda.py tests/test_cuda_render.py $(ls tests/test_cuda_model_kernels.py 2>/dev/null) > "$OUT/pytest_cuda.log" 2>&1
  echo "cuda tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_cuda.log" | tail -n 25
fi
if [ "$T_LLAMA" != 0 ]; then
  timeout -s INT -k 15 "$T_LLAMA" python3 benchmarks/llama_bench.py --backend cuda --dtype bfloat16,float32 \
    --prompt-tokens 32 --max-new-tokens 64 --max-seq-len 512 --search-graphs "$GRAPHS" \
    --json "$OUT/llama.json" > "$OUT/llama.log" 2>&1
  echo "llama rc=$?"; tail -n 14 "$OUT/llama.log"
fi
if [ "$T_DLRM" != 0 ]; then
  timeout -s INT -k 15 "$T_DLRM" python3 examples/dlrm.py --backend cuda --num-cat 1,4,16,32 \
    --search-limit "$GRAPHS" > "$OUT/dlrm.log" 2>&1
  echo "dlrm rc=$?"; tail -n 14 "$OUT/dlrm.log"
fi
if [ "$T_ANCH" != 0 ] && [ -d .anchors ]; then
  timeout -s INT -k 10 "$T_ANCH" python3 .anchors/llama_anchor.py bf16 32 > "$OUT/llama_anchor.log" 2>&1
  echo "llama anchor rc=$?"; tail -n 12 "$OUT/llama_anchor.log"
  timeout -s INT -k 10 "$T_ANCH" python3 .anchors/dlrm_anchor.py 1 4 16 32 > "$OUT/dlrm_anchor.log" 2>&1
  echo "dlrm anchor rc=$?"; tail -n 12 "$OUT/dlrm_anchor.log"
fi
if [ "$T_PROF" != 0 ]; then  # where the time goes: each kind of kernel inside a CUDA graph
  timeout -s INT -k 10 "$T_PROF" python3 benchmarks/cuda_step_profile.py --top 14 > "$OUT/profile_llama.txt" 2>&1
  echo "llama profile rc=$?"; head -n 24 "$OUT/profile_llama.txt"
  timeout -s INT -k 10 "$T_PROF" python3 benchmarks/cuda_step_profile.py --model dlrm --num-cat 32 --top 14 > "$OUT/profile_dlrm.txt" 2>&1
  echo "dlrm profile rc=$?"; head -n 24 "$OUT/profile_dlrm.txt"
fi

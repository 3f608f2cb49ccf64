#!/usr/bin/env bash
# One device-machine call that checks the CUDA path end to end and measures the models beside the
# peers: GPU tests, the DLRM sweep at the anchor's 100,000-row tables and its anchor, Llama-1B
# (random weights) TTFT/TPOT in bf16 and fp32 and its anchor, then the decode-loop profile. Each
# part runs under a time cap; logs go to $OUT (at most 8 files: the device returns no more).
#
# Usage, on the device machine from the repository root (egglog installed, e.g. from .whl/; the
# peers' anchor scripts copied from ../shared/anchors into .anchors/):
#   bash benchmarks/gpu_run.sh [tests-s] [dlrm-s] [llama-s] [anchors-s] [profile-s] [search-graphs]
# A cap of 0 skips that part. The whole call must stay under the device's 10 minutes a command.
# Environment: LLAMA_DTYPES (default bfloat16,float32); T_LONG=seconds adds a long-context Llama
# run (a 1000-token prompt, cache of 2048) with the attention split on and off (LONG_SPLITS, default
# "1 0") and, unless the anchors' cap is 0, HF transformers' time to first token for that prompt; STEP_ONLY=1 keeps only the decode step's profile and its A/B of the split at c = 40 in a
# bucket up to 2048 (SHORT_SPLITS, default "1 0"); T_BLOCK=seconds runs transformer_block.py (one Llama
# layer beside torch and JAX); T_KERN=seconds runs cuda_kernels.py --quick
# (KERN_ONLY picks its parts, default elementwise,rows,gemv,mlp,gemm,step; kn sweeps the
# x @ W GEMV's launch shape; prompt times a 32-row prompt's projections three ways).
set -u
OUT=${OUT:-/tmp/lf_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 LUMINAL_CACHE_DIR=${LUMINAL_CACHE_DIR:-/tmp/lf_cache}
T_TESTS=${1:-110}
T_DLRM=${2:-100}
T_LLAMA=${3:-150}
T_ANCH=${4:-170}
T_PROF=${5:-60}
GRAPHS=${6:-3}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader;
  cat COMMIT 2>/dev/null || git rev-parse --short HEAD;  # a clean export carries COMMIT
  python3 -c "import sys, cupy, egglog; print(sys.version.split()[0], 'cupy', cupy.__version__)"; } 2>&1 | tee "$OUT/env.txt"
if [ "$T_TESTS" != 0 ]; then
  # The CUDA-side test files whole, less the tests that run kernels on the CPU emulation of CUDA
  # (CPU CI runs those; one alone took 233 s of a 300 s call here), then every GPU-marked test of
  # the other files.
  XD=$(python3 -c "import xdist" 2>/dev/null && printf -- "-n 8")
  LIST="$(ls tests/test_cuda*.py) tests/test_jit.py tests/test_dispatch.py tests/test_dlpack.py tests/test_multi_embedding_bag.py
    tests/test_raw_index_bag.py tests/test_row_kernels.py tests/test_attention_rule.py tests/test_attention_tiles.py tests/test_rope_rule.py
    tests/test_half_casts.py tests/test_attention_store.py tests/test_llama.py tests/test_argmax_rule.py tests/test_program_fuzz.py"
  LIST=$(echo $LIST)  # one line: it is pasted into a bash -c command below
  IGNORE=$(for f in $LIST; do printf -- "--ignore=%s " "$f"; done)
  timeout -s INT -k 10 "$T_TESTS" bash -c "python3 -m pytest -q $XD -p no:cacheprovider -p no:benchmark -rf --tb=line \
    --durations=10 -k 'not emulat' $LIST && python3 -m pytest -q $XD -p no:cacheprovider -p no:benchmark -rf \
    --tb=line -m gpu tests $IGNORE" > "$OUT/pytest_cuda.log" 2>&1
  echo "tests rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_cuda.log" | tail -n 12
fi
if [ "$T_DLRM" != 0 ]; then
  timeout -s INT -k 10 "$T_DLRM" python3 examples/dlrm.py --backend cuda --num-cat 1,4,16,32 --rows 100000 \
    --search-limit "$GRAPHS" > "$OUT/dlrm.log" 2>&1
  echo "dlrm rc=$?"; tail -n 5 "$OUT/dlrm.log"
  if [ "$T_ANCH" != 0 ] && [ -d .anchors ]; then
    timeout -s INT -k 10 "$T_ANCH" python3 .anchors/dlrm_anchor.py 1 4 16 32 > "$OUT/dlrm_anchor.log" 2>&1
    echo "dlrm anchor rc=$?"; grep '^{"nc' "$OUT/dlrm_anchor.log" | cut -c1-400
  fi
fi
if [ "$T_LLAMA" != 0 ]; then
  timeout -s INT -k 10 "$T_LLAMA" python3 benchmarks/llama_bench.py --backend cuda --dtype "${LLAMA_DTYPES:-bfloat16,float32}" \
    --prompt-tokens 32 --max-new-tokens 64 --max-seq-len 512 --search-graphs "$GRAPHS" \
    --json "$OUT/llama.json" > "$OUT/llama.log" 2>&1
  echo "llama rc=$?"; tail -n 5 "$OUT/llama.log"
  if [ "$T_ANCH" != 0 ] && [ -d .anchors ]; then
    timeout -s INT -k 10 "$T_ANCH" python3 .anchors/llama_anchor.py bf16 32 > "$OUT/llama_anchor.log" 2>&1
    echo "llama anchor rc=$?"; grep '^RESULT' "$OUT/llama_anchor.log" | cut -c1-1500
  fi
fi
if [ "${T_LONG:-0}" != 0 ]; then  # a long context: the attention's keys split among blocks, or not
  for split in ${LONG_SPLITS:-1 0}; do
    echo "== long context, LUMINAL_CUDA_ATTN_SPLIT=$split ==" >> "$OUT/llama.log"
    LUMINAL_CUDA_ATTN_SPLIT=$split timeout -s INT -k 10 "$T_LONG" python3 benchmarks/llama_bench.py --backend cuda \
      --dtype bfloat16 --prompt-tokens 1000 --max-new-tokens 64 --max-seq-len 2048 --search-graphs "$GRAPHS" \
      >> "$OUT/llama.log" 2>&1
    echo "long context split=$split rc=$?"; tail -n 2 "$OUT/llama.log"
  done
  if [ "$T_ANCH" != 0 ]; then  # the peer's time to first token for the same prompt (HF transformers)
    timeout -s INT -k 10 "$T_LONG" python3 benchmarks/long_prompt_peers.py --prompt-tokens 1000 >> "$OUT/llama.log" 2>&1
    echo "long prompt peer rc=$?"; tail -n 1 "$OUT/llama.log" | cut -c1-300
  fi
fi
if [ "$T_PROF" != 0 ] && [ "${STEP_ONLY:-0}" = 1 ]; then
  { timeout -s INT -k 10 "$T_PROF" python3 benchmarks/cuda_step_profile.py --top 12
    for split in ${SHORT_SPLITS:-1 0}; do  # a short context in a decode bucket up to 2048 (the split planned, idle at C <= 128)
      echo "== A/B: c = 40 in a bucket up to 2048, LUMINAL_CUDA_ATTN_SPLIT=$split =="
      LUMINAL_CUDA_ATTN_SPLIT=$split timeout -s INT -k 10 "$T_PROF" python3 benchmarks/cuda_step_profile.py \
        --context-bucket 2048 --top 3
    done; } \
    > "$OUT/decode_loop.txt" 2>&1
  echo "step profiles rc=$?"; grep -E "==|launches|replayed alone|attention_rows" "$OUT/decode_loop.txt"
elif [ "$T_PROF" != 0 ]; then  # where a generated token's time goes (step, pick, host queueing)
  timeout -s INT -k 10 "$T_PROF" python3 benchmarks/decode_loop_profile.py --tokens 32 > "$OUT/decode_loop.txt" 2>&1
  echo "decode loop rc=$?"; tail -n 9 "$OUT/decode_loop.txt"
  # every step of the decode step and of a DLRM forward timed alone (appended: $OUT holds 8 files)
  { timeout -s INT -k 10 "$T_PROF" python3 benchmarks/cuda_step_profile.py --top 25;
    timeout -s INT -k 10 "$T_PROF" python3 benchmarks/cuda_step_profile.py --model dlrm --num-cat 1 --top 16;
    echo "== the prompt's step (32 tokens) =="
    timeout -s INT -k 10 "$T_PROF" python3 benchmarks/cuda_step_profile.py --prefill 32 --top 12;
    echo "== A/B: the gate/up pair GEMV as a loop (every row load issued first by default) =="
    LUMINAL_CUDA_GEMV_PAIR_UNROLL=0 timeout -s INT -k 10 "$T_PROF" python3 benchmarks/cuda_step_profile.py --top 3; } \
    >> "$OUT/decode_loop.txt" 2>&1
  echo "step profiles rc=$?"
fi
if [ "${T_BLOCK:-0}" != 0 ]; then  # one Llama layer beside torch and JAX (T_BLOCK seconds; off unless set)
  timeout -s INT -k 10 "$T_BLOCK" python3 benchmarks/transformer_block.py >> "$OUT/llama.log" 2>&1
  echo "transformer block rc=$?"; grep -E "layer|ms " "$OUT/llama.log" | tail -n 10 | cut -c1-160
fi
if [ "${T_KERN:-0}" != 0 ]; then  # kernel figures (T_KERN seconds; off unless set)
  # (appended to the env file: $OUT returns at most 8 files)
  { echo "== python3 benchmarks/cuda_kernels.py --quick =="
    timeout -s INT -k 10 "$T_KERN" python3 benchmarks/cuda_kernels.py --quick --out /tmp/lf_kernels \
      --only "${KERN_ONLY:-elementwise,rows,gemv,mlp,gemm,step}"; } >> "$OUT/env.txt" 2>&1
  echo "kernels rc=$?"; grep '^{' "$OUT/env.txt" | grep -E "softmax|rms|copy|gemv|MLP|prompt" | cut -c1-260
fi
date -u

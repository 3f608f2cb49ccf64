#!/usr/bin/env bash
# A/B of environment settings on the Llama-1B decode step (GPU): each setting runs
# benchmarks/cuda_step_profile.py once, in its own process with its own search cache, in the
# order given (repeat a setting to interleave). Prints the replay time and each GEMV's row from
# the traced profile; the whole logs go to $OUT/sweep.log.
#
#   bash benchmarks/step_sweep.sh "LUMINAL_CUDA_GEMV_WPR=2" "LUMINAL_CUDA_GEMV_WPR=4" ...
#   PROFILE_ARGS=--trace bash benchmarks/step_sweep.sh ...   # what each launch adds, block by block
# A setting is one or more VAR=value words ("A=1" for the defaults).
set -u
OUT=${OUT:-/tmp/lf_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
i=0
for setting in "$@"; do
  i=$((i + 1))
  echo "== [$i] $setting ${PROFILE_ARGS:-}" | tee -a "$OUT/sweep.log"
  # shellcheck disable=SC2086
  env $setting LUMINAL_CACHE_DIR="/tmp/lf_sweep_cache_$i" timeout "${T_EACH:-150}" \
    python3 benchmarks/cuda_step_profile.py --top 24 ${PROFILE_ARGS:-} >> "$OUT/sweep.log" 2>&1
  grep -E "replayed alone|back to back" "$OUT/sweep.log" | tail -n 2
  grep -A16 "medians by kernel" "$OUT/sweep.log" | tail -n 13 | grep -E "gemv|attention" | cut -c1-120
done

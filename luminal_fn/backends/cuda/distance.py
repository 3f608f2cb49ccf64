"""The search's output check on the GPU: one kernel measures a candidate's output against the
kept reference (the largest |difference|, the sum of squares, whether the output is non-finite
where the reference is finite), so three numbers an output come back instead of the output.

(CuPy's own array operations did the same in run FG at twice the host comparison's time: on a
cold CuPy cache they compiled a dozen kernels during the first candidates' checks.)
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..compare import Distance, KeptOutput, comparable, keep_host

BLOCK = 256
MAX_BLOCKS = 1024  # a grid-stride loop: enough blocks to fill an H100/H200 several times over

# storage dtype -> (the C type read, its value as a double); bfloat16 is stored as uint16 bits
_READS = {
    "float32": ("float", "(double)x"),
    "float64": ("double", "x"),
    "float16": ("unsigned short", "(double)lf_h2f(x)"),
    "uint16": ("unsigned short", "(double)__uint_as_float(((unsigned)x) << 16)"),
    "int32": ("int", "(double)x"),
    "bool": ("unsigned char", "(double)x"),
}

_KERNEL = r"""
extern "C" __global__ void lf_distance_@NAME@(const @T@* __restrict__ got, const double* __restrict__ ref,
                                          long long n, unsigned long long* __restrict__ out) {
  // out[0]: the largest |got - ref|, a non-negative double's bits (they order as unsigned
  // integers); out[1]: the sum of squared differences (a double); out[2]: 1 where got is not
  // finite and ref is. Elements where ref is not finite are not compared.
  double big = 0.0, sq = 0.0;
  unsigned bad = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const double r = ref[i];
    if (!isfinite(r)) continue;
    const @T@ x = got[i];
    const double g = @VALUE@;
    if (!isfinite(g)) { bad = 1; continue; }
    const double d = fabs(g - r);
    big = fmax(big, d);
    sq += d * d;
  }
  for (int o = 16; o > 0; o >>= 1) {
    big = fmax(big, __shfl_xor_sync(0xffffffffu, big, o));
    sq += __shfl_xor_sync(0xffffffffu, sq, o);
    bad |= __shfl_xor_sync(0xffffffffu, bad, o);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicMax(out, (unsigned long long)__double_as_longlong(big));
    atomicAdd((double*)(out + 1), sq);
    if (bad) atomicOr(out + 2, 1ull);
  }
}
"""

SOURCE = "\n".join(
    ["__device__ __forceinline__ float lf_h2f(unsigned short h) {",
     "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;",
     "}"]
    + [_KERNEL.replace("@NAME@", name).replace("@T@", t).replace("@VALUE@", value)
       for name, (t, value) in _READS.items()])


@functools.lru_cache(maxsize=None)
def _module(cp):
    return cp.RawModule(code=SOURCE)


def keep(cp, buf, host: np.ndarray) -> KeptOutput:
    """``buf`` (read back as ``host``, bfloat16 as itself) kept for ``measure``: the host's
    figures (norm, kind, small values) and the values as float64 on the device, where
    ``measure`` reads them (float64 holds every storage dtype's values exactly)."""
    kept = keep_host(host)
    if str(buf.dtype) in _READS:  # (else the host's copy is what is compared)
        kept.device = cp.asarray(np.ascontiguousarray(comparable(host), dtype=np.float64))
        kept.values = kept.finite = None  # (the device copy is what is compared)
    return kept


def measure(cp, bufs: list, kept: list) -> list:
    """Each of ``bufs`` against its ``kept`` output on the device: the kernels are queued one
    after another into one array of figures, read back once (a Llama candidate has 33 outputs:
    one wait, not 33). None where keep left the output on the host (a dtype the kernel does not
    read)."""
    rows = [k for k, ref in enumerate(kept) if ref.device is not None]
    result: list = [None] * len(bufs)
    if not rows:
        return result
    out = cp.zeros((len(rows), 3), dtype=cp.uint64)
    for row, k in enumerate(rows):
        got = cp.ascontiguousarray(bufs[k]).ravel()
        n = got.size
        if n:
            blocks = min(MAX_BLOCKS, -(-n // BLOCK))
            _module(cp).get_function(f"lf_distance_{got.dtype}")(
                (blocks,), (BLOCK,), (got, kept[k].device, np.int64(n), out[row]))
    for k, (big_bits, sq_bits, bad) in zip(rows, out.get()):
        big, sq = np.array([big_bits, sq_bits], np.uint64).view(np.float64)
        result[k] = (Distance(math.nan, math.inf, False) if bad
                       else Distance(float(big), math.sqrt(float(sq)), True))
    return result

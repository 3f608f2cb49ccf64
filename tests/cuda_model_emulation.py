"""Running the CUDA backend's model kernels (backends/cuda/modelkernels.py) on the CPU, for tests
on machines without a GPU.

The planned kernel text is compiled by g++ as C++ against a small stand-in for CUDA: the
qualifiers vanish; ``threadIdx``/``blockIdx`` are thread-local; blocks run one after another,
each as ``blockDim.x`` real threads; ``__syncthreads`` is a ``std::barrier`` across the block;
``lf_shfl`` (the prelude's warp shuffle) exchanges through a per-warp slot array between two
per-warp barriers; dynamic shared memory is one static array (one block runs at a time). The
parameter table P is built as the backend builds it (dims of the call, then one pointer per
buffer), and the grid is the backend's ``launch_shape`` at the bucket's largest dims.

This checks indexing, strides, params, the dims table, launch sizes, shared-memory staging and
the shuffle reduction against NumPy. It does not check what only the GPU decides (NVRTC, the
real memory model, float rounding of the device's math). Only plans whose every step is a model
kernel over float32/int32 data run here (the stand-in has no half types or vector helpers).
"""
from __future__ import annotations

import ctypes
import os
import subprocess

import numpy as np

from luminal_fn.backends.cuda.executable import launch_shape
from luminal_fn.backends.cuda.plan import KernelStep, evaluate

_SHIM = r"""
#include <barrier>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __shared__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(n)
#define __align__(n)
struct lf_dim3 { unsigned x, y, z; };
static thread_local lf_dim3 threadIdx, blockIdx;
static lf_dim3 blockDim, gridDim;
alignas(16) unsigned char lf_smem[1 << 17];
static std::barrier<>* lf_block_bar;
static std::barrier<>** lf_warp_bar;
static float lf_xf[1024];
static int lf_xi[1024];
inline void __syncthreads() { lf_block_bar->arrive_and_wait(); }
template <typename T> static T lf_exchange(T* slots, T v, int o) {
  const unsigned t = threadIdx.x;
  slots[t] = v;
  lf_warp_bar[t / 32]->arrive_and_wait();
  T r = slots[(t & ~31u) | ((t & 31u) ^ (unsigned)o)];
  lf_warp_bar[t / 32]->arrive_and_wait();
  return r;
}
inline float lf_shfl(float v, int o) { return lf_exchange(lf_xf, v, o); }
inline int lf_shfl(int v, int o) { return lf_exchange(lf_xi, v, o); }
"""

C_TYPES = {"float32": "float", "int32": "int"}


def _runner(src) -> str:
    n = len(src.buffers) + len(src.dims)
    args = ", ".join(f"a[{j}]" for j in range(n))
    return f"""
extern "C" void run_{src.name}(const long long* P, const int* a, unsigned gx, unsigned gy, unsigned gz,
                              unsigned block) {{
  blockDim = {{block, 1, 1}};
  gridDim = {{gx, gy, gz}};
  const unsigned nwarps = (block + 31) / 32;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {{
        std::barrier<> bar(block);
        std::vector<std::unique_ptr<std::barrier<>>> warps;
        std::vector<std::barrier<>*> wp;
        for (unsigned w = 0; w < nwarps; ++w) {{
          warps.emplace_back(new std::barrier<>(32));
          wp.push_back(warps.back().get());
        }}
        lf_block_bar = &bar;
        lf_warp_bar = wp.data();
        std::vector<std::thread> ts;
        for (unsigned t = 0; t < block; ++t)
          ts.emplace_back([=] {{ threadIdx = {{t, 0, 0}}; blockIdx = {{x, y, z}}; {src.name}(P, {args}); }});
        for (auto& th : ts) th.join();
      }}
}}
"""


def emulable(bp) -> bool:
    """Every step a model kernel (no host steps, no generic kernels) over float32/int32 data."""
    model = ("embedding_bag", "embedding_bag_multi", "dlrm_interact", "conv2d_bias")
    for s in bp.steps:
        if not isinstance(s, KernelStep) or s.source.kind not in model:
            return False
        if s.source.block % 32 or s.source.block > 1024:
            return False
    return all(b.dtype.name in C_TYPES for b in bp.bufs if b.first >= 0)


def build(plans: list, workdir: str):
    """Compile every kernel of ``plans`` into one shared library; returns the ctypes handle."""
    seen: dict = {}
    for bp in plans:
        for s in bp.steps:
            seen.setdefault(s.source.name, s.source)
    text = _SHIM + "\n".join(k.text + _runner(k) for k in seen.values())
    src = os.path.join(workdir, "model_kernels.cpp")
    lib = os.path.join(workdir, "model_kernels.so")
    with open(src, "w") as f:
        f.write(text)
    res = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                          "-Wno-unknown-pragmas", "-o", lib, src], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"g++ rejected the emulated kernels:\n{res.stderr[:4000]}")
    return ctypes.CDLL(lib)


def run(lib, bp, inputs: list, dims: dict) -> list:
    """Run a plan's steps on the emulation: the caller's arrays as inputs, outputs allocated at
    the call's dims; returns the outputs."""
    keep = []
    ptrs = np.zeros(len(bp.symbols) + len(bp.bufs), np.int64)
    for i, s in enumerate(bp.symbols):
        ptrs[i] = dims[s]
    outs = {}
    arena = np.zeros(max(bp.arena_bytes, 1) + 16, np.uint8)
    keep.append(arena)
    for b in bp.bufs:
        if b.first < 0:
            continue
        np_t = np.float32 if b.dtype.name == "float32" else np.int32
        if b.kind == "input":
            arr = np.ascontiguousarray(inputs[b.index], dtype=np_t)
        elif b.kind == "const":
            arr = np.ascontiguousarray(bp.const_values[b.index], dtype=np_t).reshape(-1)
        elif b.kind == "output":
            arr = np.full(tuple(int(evaluate(d, dims)) for d in b.shape), -7777, np_t)
            outs[b.index] = arr
        else:
            ptrs[len(bp.symbols) + b.id] = arena.ctypes.data + b.offset
            continue
        keep.append(arr)
        ptrs[len(bp.symbols) + b.id] = arr.ctypes.data
    sym_index = {s: i for i, s in enumerate(bp.symbols)}
    for s in bp.steps:
        src = s.source
        args = np.array([len(bp.symbols) + b for b in s.bufs] + [sym_index[d] for d in src.dims], np.int32)
        (gx, gy, gz), (block, _, _) = launch_shape(src, bp.dims_max, 132)
        fn = getattr(lib, f"run_{src.name}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_uint] * 4
        fn(ptrs.ctypes.data, args.ctypes.data, gx, gy, gz, block)
    return [outs[k] for k in sorted(outs)]


__all__ = ["emulable", "build", "run"]

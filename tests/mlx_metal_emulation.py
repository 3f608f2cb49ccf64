"""Running the MLX backend's rendered Metal kernel bodies on the CPU, for tests on machines
without Metal.

Each body is compiled by g++ as C++ against a small stand-in for Metal: ``device`` and
``constant`` vanish; ``threadgroup`` arrays become function statics shared by the threads of the
one threadgroup running at a time; ``threadgroup_barrier`` is a ``std::barrier`` across those
threads. Threadgroups run one after another, each as ``block`` real threads, with the grid that
the backend's launch computes. This checks the kernels' indexing, masks, dims, launch sizes and
the tree reduction's barriers against NumPy. It does not check what only Metal decides (whether
its compiler accepts the source, address-space rules, float rounding of its math library).
Only float32, int32 and bool kernels run here (the stand-in has no 2-byte float types).
"""
from __future__ import annotations

import ctypes
import os
import subprocess

import numpy as np

from luminal_fn.backends.mlx.metal import MLX_METAL, kernel_for
from luminal_fn.backends.numpy.executor import Plan
from luminal_fn.backends.render import KernelInput

_SHIM = r"""
#include <barrier>
#include <cmath>
#include <thread>
#include <vector>
#define kernel
#define device
#define constant
#define threadgroup static
namespace metal { using std::isnan; using std::exp2; using std::log2; using std::sin; using std::sqrt; using std::fmod; }
using namespace metal;
typedef unsigned int uint;
struct uint3 { uint x, y, z; };
enum class mem_flags { mem_threadgroup };
static std::barrier<>* lf_group_barrier;
inline void threadgroup_barrier(mem_flags) { lf_group_barrier->arrive_and_wait(); }
"""

C_TYPES = {"float32": "float", "int32": "int", "bool": "bool"}
NP_TYPES = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}
ATTRS = ("threadgroup_position_in_grid", "thread_position_in_threadgroup", "threads_per_threadgroup",
         "threadgroups_per_grid")


def _kernel_cpp(mk, in_types: list) -> str:
    params = [f"const {C_TYPES[t]}* {n}" for n, t in zip(mk.input_names, in_types)]
    params.append(f"{C_TYPES[mk.out_dtype.name]}* out")
    params += [f"uint3 {a}" for a in ATTRS]
    casts = [f"(const {C_TYPES[t]}*)bufs[{j}]" for j, t in enumerate(in_types)]
    casts.append(f"({C_TYPES[mk.out_dtype.name]}*)bufs[{len(in_types)}]")
    return f"""
static void {mk.name}({', '.join(params)}) {{
{mk.body}
}}
extern "C" void launch_{mk.name}(void** bufs, unsigned groups, unsigned block) {{
  std::barrier<> bar(block);
  lf_group_barrier = &bar;
  for (unsigned g = 0; g < groups; ++g) {{
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([=] {{ {mk.name}({', '.join(casts)}, uint3{{g, 0, 0}}, uint3{{t, 0, 0}},
                                  uint3{{block, 1, 1}}, uint3{{groups, 1, 1}}); }});
    for (auto& th : threads) th.join();
  }}
}}
"""


# Type-checking (no execution): every storage type, 2-byte floats as float-backed structs.
_TYPECHECK_SHIM = r"""
#include <cmath>
#define kernel
#define device
#define constant
#define threadgroup
namespace metal { using std::isnan; using std::exp2; using std::log2; using std::sin; using std::sqrt; using std::fmod; }
using namespace metal;
typedef unsigned int uint;
struct uint3 { uint x, y, z; };
struct half { float v; half(float f) : v(f) {} operator float() const { return v; } };
struct bfloat16_t { float v; bfloat16_t(float f) : v(f) {} operator float() const { return v; } };
enum class mem_flags { mem_threadgroup };
inline void threadgroup_barrier(mem_flags) {}
"""
STORAGE = {"float32": "float", "float16": "half", "bfloat16": "bfloat16_t", "int32": "int", "bool": "bool"}


def typecheck(jobs: list, workdir: str) -> str | None:
    """g++ -fsyntax-only over (MetalKernel, input dtype names) pairs, each assembled as MLX
    would (signature from the names, attributes the body uses); None or the compiler's errors."""
    parts, seen = [_TYPECHECK_SHIM, _prelude()], set()
    for mk, in_types in jobs:
        if mk.name in seen:
            continue
        seen.add(mk.name)
        params = [f"const device {STORAGE[t]}* {n}" for n, t in zip(mk.input_names, in_types)]
        params.append(f"device {STORAGE[mk.out_dtype.name]}* out")
        params += [f"uint3 {a}" for a in ATTRS if a in mk.body]
        parts.append(f"kernel void {mk.name}({', '.join(params)}) {{\n{mk.body}\n}}\n")
    src = os.path.join(workdir, "typecheck.cpp")
    with open(src, "w") as f:
        f.write("\n".join(parts))
    res = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wno-attributes", src],
                         capture_output=True, text=True)
    return None if res.returncode == 0 else res.stderr[:4000]


def _prelude() -> str:
    return MLX_METAL.prelude.replace("#include <metal_stdlib>", "").replace("using namespace metal;", "")


def _node_values(graph, inputs, dims) -> list:
    """Every node's NumPy value (the reference plan's steps, without freeing intermediates)."""
    plan = Plan(graph)
    vals = [None] * len(graph.nodes)
    for nid, x in zip(graph.inputs, inputs):
        vals[nid] = np.asarray(x)
    with np.errstate(all="ignore"):
        for nid, step, _free in plan.steps:
            vals[nid] = step(vals, dims)
    return vals


def in_types(graph, node, mk) -> list | None:
    """The dtype names of a kernel's inputs, or None when it has a type the emulation lacks."""
    types = ["int32" if r == "dims" else graph.nodes[node.inputs[r][0]].dtype.name for r in mk.input_roles]
    if any(t not in C_TYPES for t in types) or mk.out_dtype.name not in C_TYPES:
        return None
    return types


def build_library(pairs: list, workdir: str) -> ctypes.CDLL:
    """Compile (MetalKernel, input dtype names) pairs into one shared library with a
    ``launch_<kernel name>(void** bufs, unsigned groups, unsigned block)`` each."""
    sources, seen = [_SHIM, _prelude()], set()
    for mk, types in pairs:
        if mk.name not in seen:
            seen.add(mk.name)
            sources.append(_kernel_cpp(mk, types))
    src = os.path.join(workdir, "kernels.cpp")
    lib = os.path.join(workdir, "kernels.so")
    with open(src, "w") as f:
        f.write("\n".join(sources))
    res = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-Wno-attributes",
                          "-o", lib, src], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"g++ rejected the emulated kernels:\n{res.stderr[:4000]}")
    return ctypes.CDLL(lib)


def launch(so, name: str, bufs: list, out: np.ndarray, groups: int, block: int) -> None:
    ptrs = (ctypes.c_void_p * (len(bufs) + 1))(*[b.ctypes.data for b in bufs], out.ctypes.data)
    getattr(so, f"launch_{name}")(ptrs, ctypes.c_uint(groups), ctypes.c_uint(block))


def emulate(cases: dict, workdir: str, kinds: dict | None = None) -> list:
    """Run every float32/int32/bool Metal kernel of ``cases`` (name -> () -> (graph, inputs,
    dims)) on the NumPy values of its node's inputs. ``kinds`` optionally forces the CustomOp
    kind per case name (e.g. "matmul_generic"). Returns (case, node id, kernel kind, kernel
    output, NumPy value of the node) for each kernel run."""
    jobs = []
    for case, build in cases.items():
        graph, inputs, dims = build()
        for node in graph.live_nodes():
            name = (kinds or {}).get(case) if node.op == "CustomOp" else None
            ins = [KernelInput(v, graph.nodes[i].dtype) for i, v in node.inputs]
            mk = kernel_for(node, ins, name)
            types = None if mk is None else in_types(graph, node, mk)
            if types is not None:
                jobs.append((case, graph, inputs, dims, node, mk, types))
    so = build_library([(j[5], j[6]) for j in jobs], workdir)
    results, values = [], {}
    for case, graph, inputs, dims, node, mk, types in jobs:
        if case not in values:
            values[case] = _node_values(graph, inputs, dims)
        vals = values[case]
        bufs = []
        for role, t in zip(mk.input_roles, types):
            if role == "dims":
                bufs.append(np.array([dims[s] for s in mk.dims], np.int32))
            else:
                b = np.ascontiguousarray(vals[node.inputs[role][0]], dtype=NP_TYPES[t]).reshape(-1)
                bufs.append(b if b.size else np.zeros(1, NP_TYPES[t]))
        ref = np.asarray(vals[node.id])
        out = np.zeros(max(ref.size, 1), NP_TYPES[mk.out_dtype.name])
        grid, group = mk.launch(dims)
        launch(so, mk.name, bufs, out, grid[0] // group[0], group[0])
        results.append((case, node.id, mk.kind, out[:ref.size].reshape(ref.shape), ref))
    return results

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

``EmulatedMetal`` stands in for ``mx.fast.metal_kernel`` itself (any body, 2-D and 3-D grids,
``thread_position_in_grid``): tests/test_mlx_model_kernels.py runs the hand kernels of
kernels/*.metal through the backend's host code with it.
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
namespace metal { using std::isnan; using std::exp2; using std::log2; using std::sin; using std::sqrt; using std::fmod; using std::min; using std::max; }
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
namespace metal { using std::isnan; using std::exp2; using std::log2; using std::sin; using std::sqrt; using std::fmod; using std::min; using std::max; }
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
    plan = Plan(graph, merge=False)  # (merged kernels' values would not be kept)
    vals = [None] * plan.n  # (the plan's slots: nodes, then values one kernel keeps for others)
    for nid, x in zip(graph.inputs, inputs):
        vals[nid] = np.asarray(x)
    with np.errstate(all="ignore"):
        for nid, step, _into, _free in plan.steps:
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


# ---- a stand-in for mx.fast.metal_kernel: any body, 3-D grids ------------------------------------
# The hand kernels of kernels/*.metal index with thread_position_in_grid over 2-D and 3-D grids.
# EmulatedMetal.metal_kernel takes the arguments mx.fast.metal_kernel takes and returns a callable
# with MLX's call signature; each call compiles the body once (per input dtypes) and runs it as
# MLX dispatches threads: every threadgroup of ``threadgroup`` threads that lies inside ``grid``,
# threads past the grid's edge not launched (partial threadgroups), each group's threads real
# threads sharing a barrier.
GRID_ATTRS = ("thread_position_in_grid",) + ATTRS
_MX_TYPE_NAMES = {"float32": "float32", "int32": "int32", "bool": "bool"}


def _grid_kernel_cpp(name: str, body: str, input_names: list, types: list, out_type: str) -> str:
    params = [f"const {C_TYPES[t]}* {n}" for n, t in zip(input_names, types)]
    params.append(f"{C_TYPES[out_type]}* out")
    params += [f"uint3 {a}" for a in GRID_ATTRS]
    casts = [f"(const {C_TYPES[t]}*)bufs[{j}]" for j, t in enumerate(types)]
    casts.append(f"({C_TYPES[out_type]}*)bufs[{len(types)}]")
    return f"""
static void {name}({', '.join(params)}) {{
{body}
}}
extern "C" void launch_{name}(void** bufs, const unsigned* grid, const unsigned* tg) {{
  unsigned ng[3];
  for (int a = 0; a < 3; ++a) ng[a] = (grid[a] + tg[a] - 1) / tg[a];
  for (unsigned bz = 0; bz < ng[2]; ++bz) for (unsigned by = 0; by < ng[1]; ++by) for (unsigned bx = 0; bx < ng[0]; ++bx) {{
    std::vector<uint3> local;
    for (unsigned z = 0; z < tg[2]; ++z) for (unsigned y = 0; y < tg[1]; ++y) for (unsigned x = 0; x < tg[0]; ++x)
      if (bx * tg[0] + x < grid[0] && by * tg[1] + y < grid[1] && bz * tg[2] + z < grid[2]) local.push_back(uint3{{x, y, z}});
    std::barrier<> bar((std::ptrdiff_t)local.size());
    lf_group_barrier = &bar;
    std::vector<std::thread> threads;
    for (uint3 t : local)
      threads.emplace_back([=] {{ {name}({', '.join(casts)},
          uint3{{bx * tg[0] + t.x, by * tg[1] + t.y, bz * tg[2] + t.z}}, uint3{{bx, by, bz}}, t,
          uint3{{tg[0], tg[1], tg[2]}}, uint3{{ng[0], ng[1], ng[2]}}); }});
    for (auto& th : threads) th.join();
  }}
}}
"""


class EmulatedMetal:
    """``metal_kernel`` with the arguments of ``mx.fast.metal_kernel`` (single output), run on the
    CPU. ``calls`` records (kernel name, grid, threadgroup) per launch."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.libs: dict = {}
        self.calls: list = []

    def _library(self, name, body, header, input_names, types, out_type):
        key = (name, body, tuple(types), out_type)
        so = self.libs.get(key)
        if so is None:
            tag = f"{name}_{len(self.libs)}"
            src = os.path.join(self.workdir, f"{tag}.cpp")
            lib = os.path.join(self.workdir, f"{tag}.so")
            hdr = header.replace("#include <metal_stdlib>", "").replace("using namespace metal;", "")
            with open(src, "w") as f:
                f.write("\n".join([_SHIM, hdr, _grid_kernel_cpp(name, body, input_names, types, out_type)]))
            res = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-Wno-attributes",
                                  "-o", lib, src], capture_output=True, text=True)
            if res.returncode != 0:
                raise RuntimeError(f"g++ rejected the emulated kernel {name}:\n{res.stderr[:4000]}")
            so = self.libs[key] = ctypes.CDLL(lib)
        return so

    def metal_kernel(self, name, input_names, output_names, source, header="", ensure_row_contiguous=True, **_):
        import mlx.core as mx

        if list(output_names) != ["out"]:
            raise ValueError(f"emulated metal_kernel {name}: one output named 'out' expected, got {output_names}")
        if not ensure_row_contiguous:
            raise ValueError(f"emulated metal_kernel {name}: only ensure_row_contiguous=True is emulated")

        def call(inputs, output_shapes, output_dtypes, grid, threadgroup, **_kw):
            assert len(inputs) == len(input_names), (name, len(inputs), input_names)
            assert all(g >= 1 for g in grid) and all(t >= 1 for t in threadgroup), (name, grid, threadgroup)
            assert threadgroup[0] * threadgroup[1] * threadgroup[2] <= 1024, (name, threadgroup)
            bufs = [np.ascontiguousarray(np.array(x)) for x in inputs]
            for n, b in zip(input_names, bufs):
                assert b.size > 0, f"{name}: input {n} is empty (Metal cannot bind an empty buffer)"
            types = [_MX_TYPE_NAMES[b.dtype.name] for b in bufs]
            (shape,) = output_shapes
            out_type = {mx.float32: "float32", mx.int32: "int32", mx.bool_: "bool"}[output_dtypes[0]]
            so = self._library(name, source, header, input_names, types, out_type)
            out = np.zeros(shape, NP_TYPES[out_type])
            ptrs = (ctypes.c_void_p * (len(bufs) + 1))(*[b.ctypes.data for b in bufs], out.ctypes.data)
            g3 = (ctypes.c_uint * 3)(*grid)
            t3 = (ctypes.c_uint * 3)(*threadgroup)
            getattr(so, f"launch_{name}")(ptrs, g3, t3)
            self.calls.append((name, tuple(grid), tuple(threadgroup)))
            return [mx.array(out)]

        return call

"""Metal kernel sources for MLX's ``mx.fast.metal_kernel`` (pure Python: no mlx, no Metal needed).

The shared renderer (backends/render) writes whole Metal kernels with their own signature;
``mx.fast.metal_kernel`` wants only the body and builds the signature itself from the input and
output names (inputs become ``const device T*`` or, under 8 elements, ``const constant T*``; any
Metal attribute named in the body, such as ``threadgroup_position_in_grid``, is added). So a
rendered kernel is taken apart here: its body is kept, the renderer's thread-position names are
bound to MLX's attribute names, and its buffer roles become input names (``b<k>``, ``lf_dims``)
and the output ``out``. The grid is counted in threads (MLX dispatches threads, not groups).

Reductions are written here as threadgroup tree reductions (shared memory halving with a
barrier per level; no SIMD shuffles), one threadgroup per output row; rows of at most
``SHORT_ROW`` elements use the renderer's one-thread-per-row kernel instead.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

from ...ir import dtypes as dt
from ...ir.expr import as_expr
from ...ir.view import View
from ..render import index as ix
from ..render import METAL, KernelInput, KernelSource, render_elementwise, render_reduce
from ..render.kernels import _symbols_of, finish
from ..render.nodes import primitive_tree
from ..render.lang import METAL_HELPERS, compute_type, store_expr
from ..render.reduce import _Plan, combine

BLOCK = 256  # threads per threadgroup (a power of two: the tree halves it)
SHORT_ROW = 16
GRID_CAP = 65536  # threadgroups at most; every kernel loops with a grid stride

# Helpers every kernel may call: the renderer's plain Metal helpers (MLX includes
# metal_stdlib itself; the tree reductions need no shuffles or atomics).
PRELUDE = METAL_HELPERS

# The Metal table with MLX's storage type for bfloat16 (bfloat16_t, which MLX maps to Metal's
# bfloat where the language has it) and this module's prelude.
MLX_METAL = dataclasses.replace(
    METAL, name="metal-mlx",
    storage={**METAL.storage, "bfloat16": "bfloat16_t"},
    store={**METAL.store, "bfloat16": "bfloat16_t({x})"},
    prelude=PRELUDE, vec_ok=False)

# the renderer's thread-position names, bound to the MLX attributes of the same meaning
_POSITION = (("lf_bid", "threadgroup_position_in_grid"), ("lf_tid", "thread_position_in_threadgroup"),
             ("lf_bdim", "threads_per_threadgroup"), ("lf_gdim", "threadgroups_per_grid"))


@dataclass
class MetalKernel:
    """One kernel as ``mx.fast.metal_kernel`` takes it."""

    name: str
    kind: str  # "ew", "red", "tree"
    body: str
    header: str
    input_names: list  # "b<k>" (node input k) and, when dims are read, "lf_dims" last
    input_roles: list  # node input index per name, or "dims"
    dims: list  # symbol names in the order of lf_dims
    block: int
    work: object  # int/Expr: parallel items (elements or rows)
    per_block: int
    cap: int | None
    out_dtype: dt.DType = dt.float32
    meta: dict = field(default_factory=dict)

    def launch(self, dims: dict) -> tuple:
        """(grid in threads, threadgroup) for these dims."""
        w = self.work if isinstance(self.work, int) else as_expr(self.work).evaluate(dims)
        groups = max(1, -(-int(w) // self.per_block))
        if self.cap:
            groups = min(groups, self.cap)
        return (groups * self.block, 1, 1), (self.block, 1, 1)

    def full_source(self) -> str:
        """Header and body as one text (what is saved when a compile fails)."""
        sig = ", ".join(self.input_names + ["out"])
        return f"{self.header}\n// kernel {self.name}({sig}); body hosted by mx.fast.metal_kernel\n{self.body}\n"


def hosted(ks: KernelSource, input_map: dict | None = None, out_dtype: dt.DType = dt.float32) -> MetalKernel:
    """A rendered Metal kernel as an MLX-hosted one. ``input_map``: role "in<k>" -> node input."""
    lines = ks.text.split("\n")
    if not lines[0].startswith("kernel void") or lines[-1] != "}":
        raise ValueError(f"{ks.name}: not a rendered Metal kernel (signature line {lines[0][:60]!r})")
    body = "\n".join(lines[1:-1]).replace("long long", "long")  # Metal's 64-bit int is long
    alias = [f"  const uint3 {ours} = {attr};" for ours, attr in _POSITION if ours in body]
    names, roles = [], []
    for role in ks.buffers:
        if role == "out":
            continue
        if not role.startswith("in"):
            raise NotImplementedError(f"{ks.name}: buffer role {role!r} is not hosted by the MLX backend")
        k = int(role[2:])
        names.append(f"b{k}")
        roles.append((input_map or {}).get(role, k))
    if ks.dims:
        names.append("lf_dims")
        roles.append("dims")
    cap = None if ks.grid_cap is None else (ks.grid_cap or GRID_CAP)
    return MetalKernel(ks.name, ks.kind, "\n".join(alias + [body]), PRELUDE, names, roles, list(ks.dims),
                       ks.block, ks.work, ks.per_block, cap, out_dtype, dict(ks.meta))


# ---- reductions: threadgroup tree -------------------------------------------------------------
def render_tree_reduce(in_shape: Sequence, axis: int, op: str, tree, inputs: Sequence[KernelInput],
                       out_dtype: dt.DType, symbols: Sequence[str] = (), block: int = BLOCK) -> KernelSource:
    """out[o] = reduce over r of tree(o, r): one threadgroup per row (grid-stride over rows);
    each thread folds a strided slice of the row, then a shared-memory tree halves the
    ``block`` partials with a barrier per level."""
    if op not in ("sum", "max"):
        raise ValueError(f"reduction op must be 'sum' or 'max', got {op!r}")
    if block & (block - 1):
        raise ValueError(f"tree reduction needs a power-of-two threadgroup, got {block}")
    lang = MLX_METAL
    names = ix.dim_names(symbols or _symbols_of(in_shape, inputs, tree))
    pl = _Plan(lang, tuple(in_shape), axis, tree, inputs, names, None)
    it, ct = pl.itype, compute_type(out_dtype)
    tid, bid, gdim = lang.thread_idx, lang.block_idx, lang.grid_dim
    body = [f"const {it} R = {ix.r(pl.R, names)}, O = {ix.r(pl.O, names)};",
            f"const uint tid = {tid};",
            f"{lang.shared} {ct} lf_tree[{block}];",
            f"for ({it} o = {bid}; o < O; o += {gdim}) {{"]
    inner = pl.row_setup("o")
    inner += pl.accumulate(op, ct, it, "tid", "R", str(block))
    inner.append("lf_tree[tid] = acc;")
    inner.append(lang.barrier)
    inner.append(f"for (uint s = {block // 2}; s > 0; s >>= 1) {{")
    inner.append(f"  if (tid < s) lf_tree[tid] = {combine(op, ct, 'lf_tree[tid]', 'lf_tree[tid + s]')};")
    inner.append(f"  {lang.barrier}")
    inner.append("}")
    inner.append(f"if (tid == 0) out[o] = {store_expr(lang, out_dtype, 'lf_tree[0]', ct)};")
    inner.append(lang.barrier + "  // lf_tree is reused by the next row")
    body += ["  " + ln for ln in inner] + ["}"]
    used = set(pl.leaves) | pl.gathers
    bufs = [(f"in{k}", f"b{k}", inputs[k].dtype, True) for k in sorted(used) if not inputs[k].inlined]
    bufs.append(("out", "out", out_dtype, False))
    return finish(lang, "tree", body, bufs, block, pl.O, 1, grid_cap=0,
                  meta={"strategy": "tree", "R": pl.R, "O": pl.O})


def render_reduction(in_shape, axis, op, tree, inputs, out_dtype, symbols=()) -> KernelSource:
    """The tree kernel, or one thread per row when the row is provably short."""
    R = in_shape[axis]
    if isinstance(R, int) and R <= SHORT_ROW:
        (ks,) = render_reduce(MLX_METAL, in_shape, axis, op, tree, inputs, out_dtype, None, symbols,
                              strategy="thread")
        return ks
    return render_tree_reduce(in_shape, axis, op, tree, inputs, out_dtype, symbols)


# ---- nodes -> kernels --------------------------------------------------------------------------
def _elementwise_tree(node):
    if node.op == "CustomOp" and node.attrs.get("name") == "fused":
        return node.attrs["expr"]
    return primitive_tree(node)


def matmul_views(a: View, b: View) -> tuple:
    """Views of A (..., M, K) and B (..., K, N) over the product space (..., M, N, K)."""
    nd = len(a.shape)
    va = a.insert_axis(nd - 1, b.shape[-1])  # (..., M, N, K), N broadcast
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    vb = b.permute(perm).insert_axis(nd - 2, a.shape[-2])  # (..., M, N, K), M broadcast
    return va, vb


def kernel_for(node, inputs: Sequence[KernelInput], name: str | None = None) -> MetalKernel | None:
    """The MLX-hosted Metal kernel of a node, or None when the node runs through MLX ops
    (Input, Constant, Output, Scatter, the library matmul)."""
    name = name or (node.attrs.get("name") if node.op == "CustomOp" else node.op)
    tree = _elementwise_tree(node)
    if tree is not None:
        ks = render_elementwise(MLX_METAL, node.shape, node.dtype, tree, inputs, vector=False)
        return hosted(ks, out_dtype=node.dtype)
    if node.op in ("SumReduce", "MaxReduce"):
        ks = render_reduction(inputs[0].view.shape, node.attrs["axis"],
                              "sum" if node.op == "SumReduce" else "max", ("in", 0), inputs, node.dtype)
        return hosted(ks, out_dtype=node.dtype)
    if name == "fused_reduce":
        ks = render_reduction(tuple(node.attrs["in_shape"]), node.attrs["axis"], node.attrs["reduce"],
                              node.attrs["expr"], inputs, node.dtype)
        return hosted(ks, out_dtype=node.dtype)
    if name == "matmul_generic":
        va, vb = matmul_views(inputs[0].view, inputs[1].view)
        d = node.dtype.name
        prod = ("Mul", d, ("in", 0), ("in", 1))
        ins = [KernelInput(va, inputs[0].dtype), KernelInput(vb, inputs[1].dtype)]
        ks = render_reduction(va.shape, len(va.shape) - 1, "sum", prod, ins, node.dtype)
        return hosted(ks, out_dtype=node.dtype)
    return None


__all__ = ["MetalKernel", "MLX_METAL", "PRELUDE", "hosted", "render_tree_reduce", "render_reduction",
           "kernel_for", "matmul_views", "BLOCK"]

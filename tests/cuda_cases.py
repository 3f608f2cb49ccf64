"""LLIR graphs built directly (CustomOp fused / fused_reduce / matmul nodes and primitives) for
the CUDA backend tests: each case gives a graph, NumPy inputs and the dims of a call. The NumPy
backend runs the same graph as the reference."""
from __future__ import annotations

import numpy as np

from luminal_fn.ir import dtypes as dt
from luminal_fn.ir.expr import var
from luminal_fn.ir.graph import Graph
from luminal_fn.ir.view import View

S = var("s")
R = np.random.default_rng(11)


def np_dtype(d):
    return dt.to_numpy(d)


def rand(shape, d=dt.float32, lo=-2.0, hi=2.0):
    if d is dt.int32:
        return R.integers(-20, 20, shape).astype(np.int32)
    if d is dt.bool_:
        return R.random(shape) < 0.5
    return R.uniform(lo, hi, shape).astype(np.float32).astype(np_dtype(d))


def cheapest_llir(fn, args, dynamic_axes=None, buckets=None):
    """The cheapest LLIR of ``fn`` traced at ``args``, over the CUDA backend's kernel kinds (what
    the backend plans without a search)."""
    import luminal_fn as lf
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor

    g = lf.jit(fn, dynamic_axes=dynamic_axes, buckets=buckets).trace(*args).hlir
    return Extractor(build_egraph(g), g, kernel_kinds=KERNEL_KINDS).extract(None)


class B:
    """A tiny graph builder."""

    def __init__(self, name="llir"):
        self.g = Graph(name)
        self.n_in = 0
        self.n_out = 0

    def input(self, shape, d=dt.float32):
        i = self.g.add("Input", (), shape, d, index=self.n_in, name=f"x{self.n_in}")
        self.n_in += 1
        return i

    def node(self, op, ins, shape, d=dt.float32, **attrs):
        return self.g.add(op, tuple(ins), shape, d, **attrs)

    def custom(self, name, ins, shape, d=dt.float32, **attrs):
        return self.g.add("CustomOp", tuple(ins), shape, d, name=name, **attrs)

    def output(self, src, shape=None, d=None):
        n = self.g.nodes[src]
        shape = n.shape if shape is None else shape
        self.g.add("Output", ((src, View.contiguous(shape)),), shape, n.dtype if d is None else d,
                   index=self.n_out)
        self.n_out += 1

    def c(self, i):
        return (i, View.contiguous(self.g.nodes[i].shape))

    def const(self, value, d=dt.int32):
        """A 0-d Constant node (a model kernel's scalar parameter, as lnp.take traces it)."""
        return self.node("Constant", [], (), d, value=np.array(value, dt.to_numpy(d)))

    def kernel_graph(self, name, ins, shape, params, d=dt.float32):
        """The graph with one model-kernel CustomOp as its output."""
        self.output(self.custom(name, ins, shape, d, params=tuple(params)))
        return self.g


def isolated_kernels(ll, names, data=rand):
    """Each kernel node of an extracted LLIR named in ``names`` alone, as (graph, inputs): its
    producers become Inputs (``data(shape, dtype)`` for their values) or copied Constants, read
    through the views the rules made."""
    names = (names,) if isinstance(names, str) else tuple(names)
    out = []
    for n in ll.live_nodes():
        if n.op != "CustomOp" or n.attrs.get("name") not in names:
            continue
        b = B()
        ins, values = [], []
        for src, view in n.inputs:
            p = ll.nodes[src]
            if p.op == "Constant":
                ins.append((b.node("Constant", [], p.shape, p.dtype, **p.attrs), view))
            else:
                ins.append((b.input(p.shape, p.dtype), view))
                values.append(data(p.shape, p.dtype))
        b.output(b.custom(n.attrs["name"], ins, n.shape, n.dtype,
                          **{k: v for k, v in n.attrs.items() if k != "name"}))
        out.append((b.g, values))
    return out


def _bcast_row(n_rows, n):
    return View((n_rows, n), (0, 1), 0, None)


# ---- cases: name -> () -> (graph, inputs, dims) -------------------------------------------------
def fused_chain(d=dt.float32, shape=(4, 37)):
    b = B()
    x, w = b.input(shape, d), b.input((shape[-1],), d)
    dn = d.name
    tree = ("Add", dn, ("Mul", dn, ("in", 0), ("in", 1)), ("Exp2", dn, ("Recip", dn, ("Add", dn, ("in", 0), ("const", 3.0, dn)))))
    y = b.custom("fused", [b.c(x), (w, _bcast_row(*shape))], shape, d, expr=tree)
    b.output(y)
    return b.g, [rand(shape, d), rand((shape[-1],), d)], {}


def fused_select_iota_gather():
    b = B()
    x, idx = b.input((6, 8)), b.input((6, 8), dt.int32)
    tree = ("Select", "float32",
            ("LessThan", "bool", ("in", 0), ("const", 0.0, "float32")),
            ("Gather", "float32", 0, ("Mod", "int32", ("in", 1), ("const", 48, "int32"))),
            ("Cast", "float32", ("Add", "int32", ("iota", var("z")), ("Cast", "int32", ("in", 0)))))
    y = b.custom("fused", [b.c(x), b.c(idx)], (6, 8), dt.float32, expr=tree)
    b.output(y)
    return b.g, [rand((6, 8)), np.abs(rand((6, 8), dt.int32)) * 3], {}


def fused_masked_pad():
    b = B()
    x = b.input((3, 5))
    v = View((5, 9), (1, 5), -10, ((0, 5), (2, 5)))  # transposed, padded by 2 before along the last axis
    y = b.custom("fused", [(x, v)], (5, 9), dt.float32, expr=("Sqrt", "float32", ("Mul", "float32", ("in", 0), ("in", 0))))
    b.output(y)
    return b.g, [rand((3, 5))], {}


def fused_half_cast(hd, reduce=False):
    """A float32 tree that rounds through the half type ``hd`` in its middle (x.astype(hd) inside
    a fusion): (x * 1.7 -> hd -> float32) * 3.1, or the row sums of (x * x -> hd -> float32)."""
    b = B()
    shape = (4, 256)
    x = b.input(shape)
    factor = ("in", 0) if reduce else ("const", 1.7, "float32")
    half = ("Cast", "float32", ("Cast", hd.name, ("Mul", "float32", ("in", 0), factor)))
    if reduce:
        y = b.custom("fused_reduce", [b.c(x)], shape[:1], dt.float32, expr=half, in_shape=shape, axis=1, reduce="sum")
    else:
        y = b.custom("fused", [b.c(x)], shape, dt.float32, expr=("Mul", "float32", half, ("const", 3.1, "float32")))
    b.output(y)
    return b.g, [rand(shape)], {}


def fused_half_cast_reference(hd, x, reduce=False):
    """fused_half_cast's value computed op by op in NumPy (float32 math, the one rounding to hd)."""
    h = dt.to_numpy(hd)
    if reduce:
        return (x * x).astype(h).astype(np.float32).sum(axis=1, dtype=np.float32)
    return (x * np.float32(1.7)).astype(h).astype(np.float32) * np.float32(3.1)


def reduce_case(shape, axis, op="sum", d=dt.float32):
    b = B()
    x = b.input(shape, d)
    out = tuple(s for k, s in enumerate(shape) if k != axis)
    dn = d.name
    tree = ("Mul", dn, ("in", 0), ("in", 0)) if op == "sum" else ("Sin", dn, ("in", 0))
    y = b.custom("fused_reduce", [b.c(x)], out, d, expr=tree, in_shape=shape, axis=axis, reduce=op)
    b.output(y)
    return b.g, [rand(shape, d, -1.0, 1.0)], {}


def matmul_case(m, k, n, d=dt.float32, batch=(), b_transposed=False, strategy=None):
    b = B()
    a = b.input(batch + (m, k), d)
    if b_transposed:
        w = b.input(batch + (n, k), d)
        nd = len(batch) + 2
        perm = list(range(nd - 2)) + [nd - 1, nd - 2]
        vb = View.contiguous(batch + (n, k)).permute(perm)
    else:
        w = b.input(batch + (k, n), d)
        vb = View.contiguous(batch + (k, n))
    attrs = {"m": m, "n": n, "k": k}
    if strategy:
        attrs["strategy"] = strategy
    y = b.custom("matmul", [b.c(a), (w, vb)], batch + (m, n), d, **attrs)
    b.output(y)
    wshape = batch + ((n, k) if b_transposed else (k, n))
    return b.g, [rand(batch + (m, k), d, -1, 1), rand(wshape, d, -1, 1)], {}


def symbolic_chain(s_value=5):
    """x (s, 64) -> exp2(x) * w + row-sum, every shape in the symbol s."""
    b = B()
    x, w = b.input((S, 64)), b.input((64,))
    e = b.custom("fused", [b.c(x), (w, View((S, 64), (0, 1), 0, None))], (S, 64), dt.float32,
                 expr=("Mul", "float32", ("Exp2", "float32", ("in", 0)), ("in", 1)))
    r = b.custom("fused_reduce", [b.c(e)], (S,), dt.float32, expr=("in", 0), in_shape=(S, 64),
                 axis=1, reduce="sum")
    b.output(e)
    b.output(r)
    return b.g, [rand((s_value, 64)), rand((64,))], {"s": s_value}


def primitives_mix():
    """Primitive nodes: Add with a broadcast view, SumReduce, MaxReduce, Cast, Scatter."""
    b = B()
    x, y, idx = b.input((5, 7)), b.input((7,)), b.input((4,), dt.int32)
    a = b.node("Add", [b.c(x), (y, _bcast_row(5, 7))], (5, 7))
    s = b.node("SumReduce", [b.c(a)], (5,), axis=1)
    m = b.node("MaxReduce", [b.c(a)], (7,), axis=0)
    ci = b.node("Cast", [b.c(a)], (5, 7), dt.int32)
    sc = b.node("Scatter", [(s, View.contiguous((5,))), b.c(idx), (m, View((4,), (1,), 0, None))], (5,),
                mode="add")
    b.output(s)
    b.output(m)
    b.output(ci)
    b.output(sc)
    return b.g, [rand((5, 7)), rand((7,)), np.array([0, 4, 4, 9], np.int32)], {}


CASES = {
    "fused_f32": lambda: fused_chain(),
    "fused_f16_vec": lambda: fused_chain(dt.float16, (8, 256)),
    "fused_bf16_vec": lambda: fused_chain(dt.bfloat16, (8, 256)),
    "fused_f32_vec": lambda: fused_chain(dt.float32, (16, 1024)),
    "fused_select_iota_gather": fused_select_iota_gather,
    "fused_masked_pad": fused_masked_pad,
    "fused_cast_to_f16": lambda: fused_half_cast(dt.float16),
    "fused_cast_to_bf16": lambda: fused_half_cast(dt.bfloat16),
    "reduce_cast_to_f16": lambda: fused_half_cast(dt.float16, reduce=True),
    "reduce_cast_to_bf16": lambda: fused_half_cast(dt.bfloat16, reduce=True),
    "reduce_sum_rows": lambda: reduce_case((16, 3000), 1),
    "reduce_sum_short": lambda: reduce_case((300, 7), 1),
    "reduce_max_cols": lambda: reduce_case((513, 64), 0, "max"),
    "reduce_sum_split": lambda: reduce_case((2, 200000), 1),
    "reduce_sum_bf16": lambda: reduce_case((8, 4096), 1, "sum", dt.bfloat16),
    "matmul_f32": lambda: matmul_case(64, 96, 80),
    "matmul_f16": lambda: matmul_case(33, 64, 40, dt.float16),
    "matmul_bf16": lambda: matmul_case(17, 64, 24, dt.bfloat16),
    "matmul_i32": lambda: matmul_case(5, 6, 7, dt.int32),
    "matmul_batched_t": lambda: matmul_case(5, 7, 3, batch=(2,), b_transposed=True),
    "matmul_rendered_f32": lambda: matmul_case(9, 40, 11, strategy="rendered"),
    "gemv_kn_f32": lambda: matmul_case(1, 256, 512),
    "gemv_kn_bf16": lambda: matmul_case(1, 2048, 1024, dt.bfloat16),
    "gemv_kn_f16_nosplit": lambda: matmul_case(1, 32, 8192, dt.float16),  # one chunk of K
    "gemv_nk_bf16": lambda: matmul_case(1, 2048, 96, dt.bfloat16, b_transposed=True),
    "gemv_nk_f32": lambda: matmul_case(1, 512, 40, b_transposed=True),
    "symbolic_chain": symbolic_chain,
    "primitives_mix": primitives_mix,
}

TOLERANCE = {"float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}

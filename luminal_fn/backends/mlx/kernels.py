"""The generic LLIR kernel kinds (fused, fused_reduce, matmul) with MLX array ops.

Expression trees (see luminal_fn/ir/llir.py) are evaluated in compute types as in the NumPy
reference; the generic matmul fallback is the broadcast multiply + sum the HLIR started from.
"""
from __future__ import annotations

import mlx.core as mx
import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import coordinate_axis
from ...ir.join_plan import join_planner
from ...ir.llir import quotient
from .ops import (OPS, _shape_of, binary, cast, compute_dtype, gather_flat, iota_values, mx_dtype, op,
                  read_parts, reduce_array, unary)


def compile_tree(tree, shape_fn):
    """A function (args, dims) -> mx.array evaluating an expression tree; ``args`` are the
    kernel's inputs already read through their views (all of the evaluation shape). Each
    distinct subtree is one step, evaluated once a call however often it is read (x * x)."""
    steps: list = []  # step(vals, args, dims) -> mx.array; vals holds the earlier steps' values
    index: dict = {}  # subtree -> its step

    def slot(t) -> int:
        k = index.get(t)
        if k is None:
            steps.append(_step(t, slot, shape_fn))
            k = index[t] = len(steps) - 1
        return k

    root = slot(tree)
    if len(steps) == 1:
        only = steps[0]
        return lambda args, dims: only((), args, dims)

    def run(args, dims):
        vals: list = []
        for step in steps:
            vals.append(step(vals, args, dims))
        return vals[root]

    return run


def _step(tree, slot, shape_fn):
    """One subtree's step, reading its operands' values from ``vals`` (``slot`` gives their
    steps, added first)."""
    tag = tree[0]
    if tag == "in":
        k = tree[1]
        return lambda vals, args, dims: args[k]
    if tag == "const":
        d = dt.BY_NAME[tree[2]]
        v = mx.array(np.asarray(tree[1], dtype=np.float32 if d.is_float else dt.to_numpy(d)),
                     compute_dtype(d))
        return lambda vals, args, dims: v
    if tag == "iota":
        expr = tree[1]
        axis_of = coordinate_axis(expr)

        def iota(vals, args, dims):
            shape = shape_fn(dims)
            axis = axis_of(shape, dims) if axis_of is not None else None
            if axis is not None:  # one axis's coordinate: a row that broadcasts (a join's test)
                return mx.arange(shape[axis], dtype=mx.int32).reshape(
                    tuple(n if k == axis else 1 for k, n in enumerate(shape)))
            n = int(np.prod(shape)) if shape else 1
            return iota_values(expr, n, dims).reshape(shape)

        return iota
    d = dt.BY_NAME[tree[1]]
    cd = compute_dtype(d)
    if tag == "Cast":
        a = slot(tree[2])
        if d.is_float and cd != mx_dtype(d):  # a cast to half precision rounds, even inside a tree
            hd = mx_dtype(d)
            return lambda vals, args, dims: vals[a].astype(hd).astype(cd)
        if d.is_float:
            return lambda vals, args, dims: vals[a].astype(cd)
        return lambda vals, args, dims: cast(vals[a], d)
    if tag in ("Exp2", "Log2", "Sin", "Sqrt", "Recip"):
        a = slot(tree[2])
        if d.is_float:  # stay in the compute type inside a tree (rounded only when stored)
            return lambda vals, args, dims: unary(tag, vals[a].astype(cd), dt.float32)
        return lambda vals, args, dims: unary(tag, vals[a], d)
    q = quotient(tree)
    if q is not None:  # a * recip(b): one rounding, as NumPy's a / b
        a, b = slot(q[0]), slot(q[1])
        return lambda vals, args, dims: mx.divide(vals[a].astype(cd), vals[b].astype(cd))
    if tag in ("Add", "Mul", "Mod", "LessThan"):
        a, b = slot(tree[2]), slot(tree[3])
        if tag == "LessThan":
            return lambda vals, args, dims: _less(vals[a], vals[b])
        dd = dt.float32 if d.is_float else d
        return lambda vals, args, dims: binary(tag, vals[a].astype(cd), vals[b].astype(cd), dd)
    if tag == "Select":
        c, x, y = (slot(t) for t in tree[2:5])
        return lambda vals, args, dims: mx.where(vals[c], vals[x].astype(cd), vals[y].astype(cd))
    if tag == "Gather":
        k = tree[2]
        idx = slot(tree[3])
        return lambda vals, args, dims: gather_flat(args[k], vals[idx]).astype(cd)
    raise NotImplementedError(f"MLX backend: fused tree op {tag!r} is not supported")


def _less(a, b):
    if a.dtype != b.dtype:  # compare in the common compute type, as the Metal renderer does
        t = mx.float32 if mx.float32 in (a.dtype, b.dtype) else mx.int32
        a, b = a.astype(t), b.astype(t)
    return mx.less(a, b)


def shape_fn_of(shape):
    shape = tuple(shape)
    if all(isinstance(d, int) for d in shape):
        return lambda dims: shape
    return lambda dims: _shape_of(shape, dims)


@op("fused")
def _fused(node, readers):
    shape_fn = shape_fn_of(node.shape)
    fn = compile_tree(node.attrs["expr"], shape_fn)

    def step(vals, dims):
        out = fn([r(vals, dims) for r in readers], dims)
        return cast(mx.broadcast_to(out, shape_fn(dims)), node.dtype)

    return _join_step(node, step) or step


def _join_step(node, general):
    """The step of an exact join (ir/join_plan.py): each input's part between its limits, read
    once and concatenated, instead of the select over inputs padded to the whole shape; else
    None. At dims where the limits come out of order, ``general`` (the select) runs."""
    plan = join_planner(node.attrs["expr"], [v for _, v in node.inputs], node.shape)
    if plan is None:
        return None
    srcs = [src for src, _ in node.inputs]

    def run(vals, at):
        axis, pieces = at
        parts = [read_parts(vals[srcs[i]], *p) for i, p in pieces]
        return cast(parts[0] if len(parts) == 1 else mx.concatenate(parts, axis), node.dtype)

    if plan.static:  # every decode-step join: planned once, here
        at = plan({})
        return None if at is None else (lambda vals, dims: run(vals, at))

    def join(vals, dims):
        at = plan(dims)
        return general(vals, dims) if at is None else run(vals, at)

    return join


@op("fused_reduce")
def _fused_reduce(node, readers):
    in_shape_fn = shape_fn_of(node.attrs["in_shape"])
    fn = compile_tree(node.attrs["expr"], in_shape_fn)
    axis, kind = node.attrs["axis"], node.attrs["reduce"]
    if kind not in ("sum", "max"):
        raise ValueError(f"fused_reduce: reduce must be 'sum' or 'max', got {kind!r}")

    def step(vals, dims):
        x = mx.broadcast_to(fn([r(vals, dims) for r in readers], dims), in_shape_fn(dims))
        if not node.dtype.is_float:
            x = cast(x, node.dtype)
        return reduce_array(x, axis, kind, node.dtype)

    return step


def matmul_library(a, b, d: dt.DType):
    if not d.is_float:  # mx.matmul takes floating types only; int32 matmul wraps like NumPy's
        return matmul_generic(a, b, d)
    cd = compute_dtype(d)
    return mx.matmul(a.astype(cd), b.astype(cd)).astype(mx_dtype(d))


def matmul_generic(a, b, d: dt.DType):
    """The fallback kept for search: (..., M, K, 1) * (..., 1, K, N) summed over K."""
    cd = compute_dtype(d)
    prod = mx.expand_dims(a.astype(cd), -1) * mx.expand_dims(b.astype(cd), -3)
    return reduce_array(prod, prod.ndim - 2, "sum", d)


def _matmul_builder(impl):
    def build(node, readers):
        ra, rb = readers
        if node.dtype.is_bool:
            # bool matmul: any(a & b) over K, as NumPy's matmul on bools
            return lambda vals, dims: mx.any(mx.expand_dims(ra(vals, dims), -1) & mx.expand_dims(rb(vals, dims), -3),
                                             axis=-2)
        return lambda vals, dims: impl(ra(vals, dims), rb(vals, dims), node.dtype)

    return build


OPS["matmul"] = _matmul_builder(matmul_library)
OPS["matmul_generic"] = _matmul_builder(matmul_generic)

from . import model_kernels as _model_kernels  # noqa: E402,F401  (registers the model kernels)

__all__ = ["compile_tree", "matmul_library", "matmul_generic"]

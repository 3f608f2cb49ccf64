"""LLIR nodes executed with MLX's own array ops (the path where Metal is absent: Linux, CI).

Mirrors the NumPy reference (backends/numpy) op by op: every node yields an array of its shape
(MLX may keep one broadcast); inputs are read through their views with ``mx.as_strided`` over the
producer made row-major (``mx.contiguous``), masks become zero padding around the valid region.
Semantics kept from the reference: Mod is C's fmod (integer b == 0 gives 0), half-precision math
runs in float32, float -> int32 casts saturate (NaN -> 0), Gather clamps its indices, Scatter
drops out-of-range indices and a repeated index in ``set`` mode keeps the last write.

Importing this module imports mlx; backends/mlx/__init__.py only does so when the backend is used.
"""
from __future__ import annotations

from typing import Callable

import mlx.core as mx
import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import Expr, compile_np
from ...ir.view import View

MX_DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16,
             "int32": mx.int32, "bool": mx.bool_}
INT_MAX, INT_MIN = 2**31 - 1, -(2**31)

OPS: dict[str, Callable] = {}  # op or kernel name -> builder(node, readers) -> step(vals, dims)


def op(name: str):
    def deco(fn):
        OPS[name] = fn
        return fn

    return deco


def mx_dtype(d: dt.DType):
    return MX_DTYPES[d.name]


def compute_dtype(d: dt.DType):
    """Half-precision math runs in float32 and is rounded when stored (as the reference)."""
    return mx.float32 if d in dt.HALF else mx_dtype(d)


# ---- host <-> MLX ----------------------------------------------------------------------------------
def to_mlx(arr: np.ndarray):
    """A NumPy array as an MLX array (bfloat16 goes through float32: exact both ways)."""
    arr = np.asarray(arr)
    if dt.to_numpy(dt.bfloat16) == arr.dtype:
        return mx.array(arr.astype(np.float32)).astype(mx.bfloat16)
    return mx.array(np.ascontiguousarray(arr)) if arr.ndim else mx.array(arr)


def to_numpy(x) -> np.ndarray:
    if x.dtype == mx.bfloat16:
        return np.asarray(x.astype(mx.float32)).astype(dt.to_numpy(dt.bfloat16))
    return np.array(x, copy=True)


def _shape_of(shape, dims) -> tuple:
    return tuple(d if isinstance(d, int) else d.evaluate(dims) for d in shape)


# ---- reading views -----------------------------------------------------------------------------------
def read_view(buf, v: View):
    """The logical array a concrete view describes over a producer's row-major data."""
    return read_parts(buf, tuple(v.shape), tuple(v.strides), v.offset, v.mask)


def read_parts(buf, shape: tuple, strides: tuple, offset: int, mask):
    """``read_view`` of a concrete view given as its parts (``View.parts_function``)."""
    if 0 in shape:
        return mx.zeros(shape, buf.dtype)
    # MLX keeps an elementwise result of broadcast operands broadcast (stride 0), and as_strided
    # refuses such arrays; contiguous() copies only those
    buf = mx.contiguous(buf)
    if mask is None:
        return mx.as_strided(buf, shape, strides, offset)
    lo, hi = View.mask_bounds(shape, mask)
    region = tuple(h - l_ for l_, h in zip(lo, hi))
    if 0 in region:
        return mx.zeros(shape, buf.dtype)
    start = offset + sum(l_ * s for l_, s in zip(lo, strides))
    src = mx.as_strided(buf, region, strides, start)
    if region == shape:
        return src
    return mx.pad(src, [(l_, d - h) for l_, h, d in zip(lo, hi, shape)])


def make_reader(src: int, view: View, producer_shape: tuple) -> Callable:
    if view.reads_whole(producer_shape):
        return lambda vals, dims: vals[src]
    if view.is_static():
        return lambda vals, dims: read_view(vals[src], view)
    parts = view.parts_function()
    return lambda vals, dims: read_parts(vals[src], *parts(dims))


# ---- elementwise math shared by primitives and fused trees ------------------------------------------
def cast(x, d: dt.DType):
    """Convert to ``d`` as the reference does: bool is x != 0, float -> int32 saturates."""
    if d is dt.bool_:
        return mx.not_equal(x, 0) if x.dtype != mx.bool_ else x
    if d is dt.int32 and mx.issubdtype(x.dtype, mx.floating):
        x = x.astype(mx.float32)
        big = x >= 2147483648.0
        small = x <= -2147483648.0
        safe = mx.where(mx.isnan(x) | big | small, 0.0, x)
        out = safe.astype(mx.int32)
        return mx.where(big, INT_MAX, mx.where(small, INT_MIN, out)).astype(mx.int32)
    return x.astype(mx_dtype(d))


def _fmod(a, b):
    """C's fmod (sign of a). MLX's remainder has the sign of b; on magnitudes both agree."""
    if a.dtype == mx.bool_:
        return mx.zeros(mx.broadcast_shapes(a.shape, b.shape), mx.bool_)
    if mx.issubdtype(a.dtype, mx.integer):
        # from the floored remainder, moved to a's sign (|a| wraps at INT_MIN); x % 0 is 0 as in
        # NumPy, and x % -1 is 0 without dividing (INT_MIN % -1 traps on the CPU)
        trivial = (b == 0) | (b == -1)
        safe = mx.where(trivial, 1, b)
        r = mx.remainder(a, safe)
        r = mx.where((r != 0) & ((r < 0) != (a < 0)), r - safe, r)
        return mx.where(trivial, 0, r).astype(a.dtype)
    r = mx.remainder(mx.abs(a), mx.abs(b))
    return mx.where(a < 0, -r, r)


def _recip(x):
    if mx.issubdtype(x.dtype, mx.floating):
        return mx.reciprocal(x)
    return cast(mx.divide(mx.array(1.0, mx.float32), x.astype(mx.float32)), dt.int32)


def _sin(x):
    # MLX's sin gives +0.0 for -0.0 (C's and NumPy's keep the zero)
    return mx.where(x == 0, x, mx.sin(x))


def _exp2(x):
    return mx.power(mx.array(2.0, x.dtype), x)


UNARY_FN = {"Exp2": _exp2, "Log2": mx.log2, "Sin": _sin, "Sqrt": mx.sqrt, "Recip": _recip}


def _add(a, b):
    return mx.logical_or(a, b) if a.dtype == mx.bool_ else mx.add(a, b)


def _mul(a, b):
    return mx.logical_and(a, b) if a.dtype == mx.bool_ else mx.multiply(a, b)


BINARY_FN = {"Add": _add, "Mul": _mul, "Mod": _fmod, "LessThan": mx.less}


def unary(name: str, x, d: dt.DType):
    cd = compute_dtype(d)
    fn = UNARY_FN[name]
    if name == "Recip" and d.is_int:
        return _recip(x)
    if not d.is_float:  # the reference computes in float and stores the node dtype
        return cast(fn(x.astype(mx.float32)), d)
    return fn(x.astype(cd)).astype(mx_dtype(d))


def binary(name: str, a, b, d: dt.DType):
    if name == "LessThan":
        return mx.less(a, b)
    cd = compute_dtype(d)
    out = BINARY_FN[name](a.astype(cd), b.astype(cd))
    return out.astype(mx_dtype(d))


def gather_flat(data, idx):
    """data.flat[clamp(idx)] (zeros when data is empty)."""
    flat = data.reshape(-1)
    n = flat.size
    if n == 0:
        return mx.zeros(idx.shape, data.dtype)
    return mx.take(flat, mx.clip(idx.astype(mx.int32), 0, n - 1))


def iota_values(expr: Expr, n: int, dims: dict):
    """int32 values of ``expr`` at z = 0..n-1 (host arithmetic on the symbolic expression)."""
    fn = compile_np(expr)
    z = np.arange(n, dtype=np.int64)
    vals = np.broadcast_to(np.asarray(fn({**dims, "z": z})), (n,)).astype(np.int32)
    return mx.array(vals)


# ---- primitives ---------------------------------------------------------------------------------------
@op("Constant")
def _constant(node, readers):
    arr = to_mlx(np.asarray(node.attrs["value"], dtype=dt.to_numpy(node.dtype)))
    return lambda vals, dims: arr


@op("Iota")
def _iota(node, readers):
    expr, n = node.attrs["expr"], node.shape[0]
    cache: dict = {}

    def step(vals, dims):
        k = n if isinstance(n, int) else n.evaluate(dims)
        key = (k, tuple(sorted(dims.items())))
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = iota_values(expr, k, dims)
        return hit

    return step


@op("Cast")
def _cast(node, readers):
    (r,) = readers
    return lambda vals, dims: cast(r(vals, dims), node.dtype)


def _unary_builder(name):
    def build(node, readers):
        (r,) = readers
        return lambda vals, dims: unary(name, r(vals, dims), node.dtype)

    return build


def _binary_builder(name):
    def build(node, readers):
        ra, rb = readers
        return lambda vals, dims: binary(name, ra(vals, dims), rb(vals, dims), node.dtype)

    return build


for _n in UNARY_FN:
    OPS[_n] = _unary_builder(_n)
for _n in BINARY_FN:
    OPS[_n] = _binary_builder(_n)


SUM_BLOCK = 256  # a float sum over a longer axis on MLX's CPU device adds blocks this long first


def float_sum(x, axis: int, keepdims: bool = False):
    """mx.sum of a float32 array; on MLX's CPU device an axis past 4 * SUM_BLOCK is summed in
    blocks, then the blocks' sums: its loop adds one by one in float32, so a 128256-long row of
    probabilities came out 3e-4 low (its small terms rounded away). Metal adds in a tree."""
    n = x.shape[axis]
    if n <= 4 * SUM_BLOCK or mx.default_device().type != mx.cpu:
        return mx.sum(x, axis=axis, keepdims=keepdims)
    axis %= x.ndim
    nb = -(-n // SUM_BLOCK)
    if nb * SUM_BLOCK != n:
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, nb * SUM_BLOCK - n)
        x = mx.pad(x, widths)
    x = mx.reshape(x, x.shape[:axis] + (nb, SUM_BLOCK) + x.shape[axis + 1:])
    out = mx.sum(mx.sum(x, axis=axis + 1), axis=axis)
    return mx.expand_dims(out, axis) if keepdims else out


def reduce_array(x, axis: int, kind: str, d: dt.DType):
    """Sum (float accumulation in float32) or NaN-propagating max over one axis."""
    if kind == "sum":
        if d.is_float:
            return float_sum(x.astype(mx.float32), axis).astype(mx_dtype(d))
        if d.is_bool:
            return mx.any(x, axis=axis)
        return mx.sum(x, axis=axis).astype(mx_dtype(d))
    if x.shape[axis] == 0:
        shape = x.shape[:axis] + x.shape[axis + 1:]
        init = float("-inf") if d.is_float else (INT_MIN if d.is_int else False)
        return mx.full(shape, init, mx_dtype(d))
    if d.is_bool:
        return mx.any(x, axis=axis)
    if d.is_float:
        return mx.max(x.astype(mx.float32), axis=axis).astype(mx_dtype(d))
    return mx.max(x, axis=axis)


@op("SumReduce")
def _sum(node, readers):
    (r,) = readers
    axis = node.attrs["axis"]
    return lambda vals, dims: reduce_array(r(vals, dims), axis, "sum", node.dtype)


@op("MaxReduce")
def _max(node, readers):
    (r,) = readers
    axis = node.attrs["axis"]
    return lambda vals, dims: reduce_array(r(vals, dims), axis, "max", node.dtype)


@op("Gather")
def _gather(node, readers):
    ri, rd = readers
    return lambda vals, dims: gather_flat(rd(vals, dims), ri(vals, dims))


def scatter(dest, idx, src, mode: str):
    """out = dest; out.flat[idx] (mode)= src; out-of-range indices dropped, last write wins."""
    shape = dest.shape
    flat = dest.reshape(-1)
    n = flat.size
    idx = idx.reshape(-1).astype(mx.int32)
    src = src.reshape(-1)
    if src.size == 1:  # (a one-element source of any rank: one value for every index)
        src = mx.broadcast_to(src, (idx.size,))
    if idx.size == 0:
        return dest
    ok = (idx >= 0) & (idx < n)
    target = mx.where(ok, idx, n)  # dropped writes land in one spare slot, sliced off below
    ext = mx.concatenate([flat, mx.zeros((1,), flat.dtype)])
    if mode == "set":
        # keep only the last write to each slot: NumPy's fancy assignment does the same
        pos = mx.arange(idx.size, dtype=mx.int32)
        last = mx.full((n + 1,), -1, mx.int32).at[target].maximum(pos)
        keep = mx.take(last, target) == pos
        target = mx.where(keep, target, n)
        out = _set_unique(ext, target, src, keep)
    elif mode == "add":
        out = ext.at[target].add(src.astype(ext.dtype)) if ext.dtype != mx.bool_ else \
            ext.at[target].maximum(src.astype(mx.bool_))
    elif mode == "mul":
        out = ext.at[target].multiply(src.astype(ext.dtype)) if ext.dtype != mx.bool_ else \
            ext.at[target].minimum(src.astype(mx.bool_))
    elif mode == "max":
        out = ext.at[target].maximum(src.astype(ext.dtype))
    elif mode == "min":
        out = ext.at[target].minimum(src.astype(ext.dtype))
    else:
        raise ValueError(f"Scatter: unknown mode {mode!r}; expected set/add/mul/max/min")
    return out[:n].reshape(shape)


def _set_unique(ext, target, src, keep):
    """Scatter-set where every kept target is unique; the rest write the spare slot n."""
    vals = mx.where(keep, src.astype(ext.dtype), mx.zeros_like(src).astype(ext.dtype))
    mask = mx.zeros(ext.shape, mx.bool_).at[target].maximum(keep)
    placed = mx.zeros(ext.shape, ext.dtype).at[target].add(vals) if ext.dtype != mx.bool_ else \
        mx.zeros(ext.shape, mx.bool_).at[target].maximum(vals)
    return mx.where(mask, placed, ext)


@op("Scatter")
def _scatter(node, readers):
    rd, ri, rs = readers
    mode = node.attrs.get("mode", "set")
    return lambda vals, dims: scatter(rd(vals, dims), ri(vals, dims), rs(vals, dims), mode)


@op("Output")
def _output(node, readers):
    (r,) = readers
    return lambda vals, dims: r(vals, dims)  # MLX arrays are immutable: no copy needed


__all__ = ["OPS", "op", "read_view", "make_reader", "to_mlx", "to_numpy", "mx_dtype", "cast",
           "unary", "binary", "reduce_array", "float_sum", "gather_flat", "scatter", "iota_values"]

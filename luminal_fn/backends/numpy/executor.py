"""Runs a graph of HLIR primitives (and the NumPy backend's own kernels) with vectorised NumPy.

``compile`` turns the graph into a list of small closures once; a call walks the list. Every
node leaves a contiguous array of its shape; inputs are read through their views with
``as_strided`` (zero-copy) and masks become a zero-filled copy with the valid region written in.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...ir import dtypes as dt
from ...ir.expr import Expr, compile_np, evaluate
from ...ir.view import View
from .sums import add_reduce

KERNELS: dict[str, Callable] = {}  # op name -> builder(node, readers) -> step(vals, dims)


def kernel(name: str):
    def deco(fn):
        KERNELS[name] = fn
        return fn

    return deco


# ---- reading views ------------------------------------------------------------------------------
def read_view(buf: np.ndarray, v: View) -> np.ndarray:
    """The logical array a concrete view describes over a contiguous buffer."""
    return read_parts(buf, tuple(v.shape), tuple(v.strides), v.offset, v.mask)


def read_parts(buf: np.ndarray, shape: tuple, strides: tuple, offset: int, mask) -> np.ndarray:
    """``read_view`` of a concrete view given as its parts (strides in elements)."""
    if 0 in shape:
        return np.zeros(shape, buf.dtype)
    flat = buf.reshape(-1)
    item = flat.itemsize
    if mask is None:
        try:  # the strided view built directly (as_strided costs ~4 us a call, this ~1 us)
            out = np.ndarray(shape, flat.dtype, flat, offset * item, tuple([s * item for s in strides]))
        except (TypeError, ValueError):  # not a plain buffer, or a view the constructor refuses
            return as_strided(flat[offset:], shape, tuple([s * item for s in strides]), writeable=False)
        out.flags.writeable = False
        return out
    return write_region(np.zeros(shape, buf.dtype), buf, strides, offset, mask)


def write_region(out: np.ndarray, buf: np.ndarray, strides: tuple, offset: int, mask) -> np.ndarray:
    """``out`` (of the view's shape) with the region a masked view keeps written from ``buf``."""
    lo, hi = View.mask_bounds(out.shape, mask)
    region = tuple(h - l_ for l_, h in zip(lo, hi))
    if 0 in region:
        return out
    flat = buf.reshape(-1)
    start = offset + sum(l_ * s for l_, s in zip(lo, strides))
    src = as_strided(flat[start:], region, tuple(s * flat.itemsize for s in strides), writeable=False)
    out[tuple(slice(l_, h) for l_, h in zip(lo, hi))] = src
    return out


def make_reader(src: int, view: View, producer_shape: tuple, producer_dtype=None) -> Callable:
    """A function (vals, dims) -> ndarray for one input edge, specialised for its view. It
    carries ``edge = (src, view, producer shape, producer dtype)`` for kernels that read the
    edge their own way (the fused tree programs read broadcast views at their compact shape)."""
    if view.reads_whole(producer_shape):
        def read(vals, dims):
            return vals[src]

        read.src = src  # kernels index vals directly for plain reads (see _binary)
    elif view.is_static():
        shape, strides, offset, mask = tuple(view.shape), tuple(view.strides), view.offset, view.mask

        def read(vals, dims):
            return read_parts(vals[src], shape, strides, offset, mask)
    else:
        parts = view.parts_function()  # (View.evaluate each call: a third of a decode step)

        def read(vals, dims):
            return read_parts(vals[src], *parts(dims))
    read.edge = (src, view, tuple(producer_shape), producer_dtype)
    return read


def _np_dtype(d: dt.DType):
    return dt.to_numpy(d)


def _compute_dtype(d: dt.DType):
    """Half-precision math runs in float32 (as on GPUs) and is rounded when stored."""
    return np.float32 if d in dt.HALF else _np_dtype(d)


# ---- primitives ---------------------------------------------------------------------------------
@kernel("Constant")
def _constant(node, readers):
    val = node.attrs["value"]
    arr = np.asarray(val, dtype=_np_dtype(node.dtype))
    arr.flags.writeable = False
    return lambda vals, dims: arr


@kernel("Iota")
def _iota(node, readers):
    expr: Expr = node.attrs["expr"]
    fn = compile_np(expr)
    n = node.shape[0]

    def step(vals, dims):
        k = n if isinstance(n, int) else n.evaluate(dims)
        z = np.arange(k, dtype=np.int64)
        out = np.broadcast_to(np.asarray(fn({**dims, "z": z})), (k,))
        return out.astype(np.int32)

    return step


def float_to_int32(x):
    """C's float -> int32 conversion made total, as every backend does it: NaN to 0, saturated
    in float64 (float32 cannot hold 2**31 - 1: it rounds up and wraps)."""
    with np.errstate(invalid="ignore"):
        x = np.clip(np.nan_to_num(np.asarray(x, np.float64), nan=0), -(2**31), 2**31 - 1)
    return x.astype(np.int32)


@kernel("Cast")
def _cast(node, readers):
    (r,) = readers
    target = _np_dtype(node.dtype)
    if node.dtype is dt.bool_:
        return lambda vals, dims: np.not_equal(r(vals, dims), 0)
    if node.dtype is dt.int32:
        def to_int(vals, dims):
            x = r(vals, dims)
            return float_to_int32(x) if x.dtype.kind == "f" else x.astype(np.int32)

        return to_int
    return lambda vals, dims: np.array(r(vals, dims), dtype=target, copy=True)


def _guarded(raw):
    """The step for use on its own (constant folding): floating-point warnings silenced, as
    kernels compute IEEE results (inf, nan) on purpose. ``Plan`` runs ``step.raw`` inside one
    errstate for the whole graph instead: an errstate costs ~1 us, more than a small ufunc."""
    def step(vals, dims):
        with np.errstate(all="ignore"):
            return raw(vals, dims)

    step.raw = raw
    return step


def _unary(fn):
    def build(node, readers):
        (r,) = readers
        cd, od = _compute_dtype(node.dtype), _np_dtype(node.dtype)
        if cd == od:
            def raw(vals, dims):
                return fn(r(vals, dims))
        else:
            def raw(vals, dims):
                return fn(r(vals, dims).astype(cd)).astype(od)
        return _guarded(raw)

    return build


for _name, _fn in (("Exp2", np.exp2), ("Log2", np.log2), ("Sin", np.sin), ("Sqrt", np.sqrt),
                   ("Recip", np.reciprocal)):
    KERNELS[_name] = _unary(_fn)


def _recip(x):
    return np.divide(1, x, dtype=x.dtype) if x.dtype.kind == "f" else np.divide(1.0, x).astype(x.dtype)


KERNELS["Recip"] = _unary(_recip)


def _binary(fn):
    def build(node, readers):
        ra, rb = readers
        cd, od = _compute_dtype(node.dtype), _np_dtype(node.dtype)
        ia, ib = getattr(ra, "src", None), getattr(rb, "src", None)
        if (cd == od or node.op == "LessThan") and ia is not None and ib is not None:
            def raw(vals, dims):
                return fn(vals[ia], vals[ib])
        elif cd == od or node.op == "LessThan":
            def raw(vals, dims):
                return fn(ra(vals, dims), rb(vals, dims))
        else:
            def raw(vals, dims):
                return fn(ra(vals, dims).astype(cd), rb(vals, dims).astype(cd)).astype(od)
        return _guarded(raw)

    return build


def _fmod(a, b, out=None):
    a = np.asarray(a)
    if a.dtype.kind in "iu":
        return np.fmod(a, np.where(b == 0, 1, b)) * (b != 0)
    if np.ndim(b) == 0 and a.ndim and _power_of_two_from_one(float(b)):
        return _fmod_power_of_two(a, b, out)
    return np.fmod(a, b, out=out)


def _power_of_two_from_one(v: float) -> bool:
    m, e = np.frexp(v)
    return m == 0.5 and e >= 1


def _fmod_power_of_two(a, c, out=None):
    """fmod(a, c) for c = 2^k >= 1, the sign of a kept: a - trunc(a / c) * c. Every step is
    exact (a / c and the product rescale by a power of two without overflow, the difference is
    the representable remainder), so the bits are fmod's; libm's fmodf takes 15 ns an element
    (these five passes: 0.3 ns). NaN and inf give NaN as fmod does."""
    if out is None or np.may_share_memory(out, a):
        out = np.empty(a.shape, a.dtype)
    if c == 1:
        np.trunc(a, out=out)
    else:
        np.divide(a, c, out=out)
        np.trunc(out, out=out)
        np.multiply(out, c, out=out)
    np.subtract(a, out, out=out)
    return np.copysign(out, a, out=out)


KERNELS["Add"] = _binary(np.add)
KERNELS["Mul"] = _binary(np.multiply)
KERNELS["Mod"] = _binary(_fmod)
KERNELS["LessThan"] = _binary(np.less)


@kernel("SumReduce")
def _sum(node, readers):
    (r,) = readers
    axis = node.attrs["axis"]
    acc = np.float32 if node.dtype.is_float else _np_dtype(node.dtype)
    od = _np_dtype(node.dtype)
    return lambda vals, dims: add_reduce(r(vals, dims), axis, acc).astype(od, copy=False)


@kernel("MaxReduce")
def _max(node, readers):
    (r,) = readers
    axis = node.attrs["axis"]
    d = node.dtype
    init = -np.inf if d.is_float else np.iinfo(np.int32).min if d.is_int else False
    od = _np_dtype(d)

    def step(vals, dims):
        x = r(vals, dims)
        if x.dtype.kind == "f" and x.dtype != np.float32 and x.dtype != np.float64:
            x = x.astype(np.float32)
        return np.max(x, axis=axis, initial=init).astype(od, copy=False)

    return step


@kernel("Gather")
def _gather(node, readers):
    ri, rd = readers

    def step(vals, dims):
        idx = ri(vals, dims)
        data = np.ascontiguousarray(rd(vals, dims)).reshape(-1)
        if data.size == 0:
            return np.zeros(idx.shape, data.dtype)
        return data[np.clip(idx, 0, data.size - 1)]

    return step


_SCATTER_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@kernel("Scatter")
def _scatter(node, readers):
    rd, ri, rs = readers
    mode = node.attrs.get("mode", "set")
    shape = node.shape

    def step(vals, dims):
        dest = np.array(rd(vals, dims), copy=True).reshape(-1)
        idx = np.asarray(ri(vals, dims)).reshape(-1)
        src = np.broadcast_to(rs(vals, dims), ri(vals, dims).shape).reshape(-1)
        ok = (idx >= 0) & (idx < dest.size)
        idx, src = idx[ok], src[ok]
        if mode == "set":
            dest[idx] = src
        else:
            _SCATTER_UFUNC[mode].at(dest, idx, src)
        out_shape = shape if all(isinstance(d, int) for d in shape) else tuple(
            d if isinstance(d, int) else d.evaluate(dims) for d in shape)
        return dest.reshape(out_shape)

    return step


@kernel("Output")
def _output(node, readers):
    (r,) = readers

    def step(vals, dims):
        x = r(vals, dims)
        # results never alias inputs, constants or each other
        return np.array(x, copy=True)

    return step


# ---- the plan -----------------------------------------------------------------------------------
class Plan:
    """A graph compiled to a list of (node id, step) closures. Fused kernels first share the
    subtrees they have in common (plan_share: a value computed once, read by later kernels);
    steps that can write into given memory get buffers kept from call to call (arena). Kernels
    read whole by one later kernel only are written into it first (tree_merge), unless
    ``merge`` is false (a caller that reads every node's value, as the kernel emulations do)."""

    def __init__(self, graph, kernels: dict | None = None, merge: bool = True):
        from .arena import ArenaPool, Layout, lifetimes
        from .plan_share import share_subtrees  # imports the kernels' modules
        from .tree_merge import inline_single_readers

        table = KERNELS if kernels is None else {**KERNELS, **kernels}
        self.graph = graph
        self.inputs = list(graph.inputs)
        self.outputs = list(graph.outputs)
        nodes, self.n, extra = share_subtrees(inline_single_readers(graph) if merge else graph)
        self.nodes = nodes

        def producer(i):
            return extra[i] if i in extra else (graph.nodes[i].shape, graph.nodes[i].dtype)

        last = {}
        for node in nodes:
            for i, _ in node.inputs:
                last[i] = node.id
        last_use: dict = {}
        for prod, consumer in last.items():
            if prod in extra or graph.nodes[prod].op != "Input":
                last_use.setdefault(consumer, []).append(prod)
        steps, requests, flow, built, padded = [], [], [], [], []
        for node in nodes:
            if node.op == "Input":
                continue
            name = node.attrs.get("name") if node.op == "CustomOp" else node.op
            build = table.get(name)
            if build is None:
                raise NotImplementedError(f"the NumPy backend has no kernel for {name!r}")
            readers = [make_reader(i, v, *producer(i)) for i, v in node.inputs]
            free = tuple(i for i in last_use.get(node.id, ()) if i not in self.outputs)
            step = build(node, readers)
            built.append(step)
            padded.append([(v.shape, np.dtype(_np_dtype(producer(i)[1])).itemsize)
                           for i, v in node.inputs if v.mask is not None])
            into = getattr(step, "into", None)
            reqs = getattr(step, "requests", None) if into is not None else None
            steps.append((node.id, getattr(step, "raw", step), into, free))
            requests.append(reqs)
            produced = (node.id, *(vid for _, vid in node.attrs.get("_stash", ())))
            flow.append((produced, [i for i, _ in node.inputs], reqs is not None))
        self.steps = steps
        self._scratch = [getattr(step, "scratch_bytes", None) for step in built]
        self._padded_reads = padded  # a padded view is read into a zero-filled array of its shape
        self.layout = Layout(requests, lifetimes(flow, self.outputs))
        self._arenas = ArenaPool(self.layout)

    def memory_bytes(self, dims) -> int:
        """Bytes a run holds beyond its inputs and the values between steps: the arena, plus the
        largest scratch a step allocates for itself (steps run one at a time)."""
        def step_bytes(own, slots, padded):
            n = sum(math.prod(evaluate(d, dims) for d in shape) * item for shape, item in padded)
            if own is not None and slots is None:  # (a step given arena buffers uses those)
                n += own(dims)
            return n

        steps = zip(self._scratch, self.layout.per_step, self._padded_reads)
        return self.layout.nbytes + max((step_bytes(*s) for s in steps), default=0)

    def run(self, inputs, dims) -> list:
        vals = [None] * self.n
        for nid, x in zip(self.inputs, inputs):
            vals[nid] = x
        arena = self._arenas.take()
        try:
            with np.errstate(all="ignore"):  # once per run; steps are the unguarded ``raw`` forms
                for (nid, step, into, free), bufs in zip(self.steps, arena):
                    vals[nid] = step(vals, dims) if bufs is None else into(vals, dims, bufs)
                    for f in free:  # release intermediates as soon as their last reader ran
                        vals[f] = None
            return [vals[o] for o in self.outputs]
        finally:
            self._arenas.give(arena)


def evaluate_node(graph, node) -> np.ndarray:
    """Run one node whose inputs are all Constants (the constant-folding pass's evaluator)."""
    readers = [make_reader(i, v, graph.nodes[i].shape) for i, v in node.inputs]
    step = KERNELS[node.op](node, readers)
    vals = {i: np.asarray(graph.nodes[i].attrs["value"], dtype=dt.to_numpy(graph.nodes[i].dtype))
            for i, _ in node.inputs}
    with np.errstate(all="ignore"):
        joined = _joined_pieces(graph, node, readers, vals)
        return joined if joined is not None else np.asarray(step(vals, {}))


def _joined_pieces(graph, node, readers, vals):
    """A float Add of two padded pieces whose valid regions tile the result is their join, each
    element the one piece's own (as the extraction reads it: optimize/exact_joins.py), so a -0.0
    of a piece is not turned into +0.0 by the other's padding (lnp.where(c, 0.0, -0.0) folds its
    two literals so). Else None."""
    if node.op != "Add" or not node.dtype.is_float or any(v.mask is None for _, v in node.inputs):
        return None
    valid = [read_view(np.ones(graph.nodes[i].shape, bool), v) for i, v in node.inputs]
    if not np.all(valid[0] ^ valid[1]):
        return None
    a, b = (r(vals, {}) for r in readers)
    return np.where(valid[0], a, b).astype(dt.to_numpy(node.dtype))

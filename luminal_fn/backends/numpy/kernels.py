"""The NumPy backend's LLIR kernels: fused trees, fused reductions and np.matmul."""
from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import compile_np, compile_py_tuple, coordinate_axis
from ...ir.join_plan import join_planner
from ...ir.llir import quotient
from ...ir.view import View
from .arena import Request
from .sums import add_reduce
from .executor import (KERNELS, _compute_dtype, _fmod, _guarded, _np_dtype, float_to_int32, kernel,
                       write_region)
from .peephole_predicates import PREDICATE_NAMES
from .tree_peephole import rewrite
from .tree_program import BINARY, PROGRAM_DTYPES, UFUNC_NAMES, compact_reader, compact_view, compile_program, select

# the unary ufuncs of the tree programs' table (Recip keeps its integer case below)
_NP_UNARY = {op: getattr(np, name) for op, name in UFUNC_NAMES.items()
             if op not in BINARY + ("Recip",)}


def _recip(x, out=None):
    if x.dtype.kind == "f":
        return np.reciprocal(x, out=out)
    return (1.0 / x).astype(x.dtype)


def _is_op(tree, shared=frozenset()) -> bool:
    """True when the subtree computes a fresh array this tree owns (not an input or a literal,
    nor a value other nodes of the tree read again)."""
    return tree[0] not in ("in", "const", "iota", "Gather", "Cast") and tree not in shared


def _repeated(tree) -> dict:
    """Operation subtrees that occur more than once in ``tree`` -> a memo slot each (an index
    computation normalises the same position a dozen times in one tree)."""
    counts: dict = {}

    def walk(t):
        if t[0] in ("in", "const"):
            return
        counts[t] = counts.get(t, 0) + 1
        if counts[t] == 1:  # (a subtree's own parts counted once, however often it recurs)
            for c in t[2:]:
                if isinstance(c, tuple):
                    walk(c)

    walk(tree)
    return {t: k for k, t in enumerate(t for t, n in counts.items() if n > 1)}


def tree_temp_bytes(tree) -> int:
    """Bytes per element of the temporaries ``compile_tree`` holds at once while evaluating
    ``tree`` (operands computed left to right, each fresh array kept until its parent ran, plus
    the memoised repeats): the kernel's scratch is this times its iteration shape's size."""
    shared = _repeated(tree)
    memo: dict = {}  # id(subtree) -> its need (a subtree may occur many times)

    def need(t) -> int:
        hit = memo.get(id(t))
        if hit is not None:
            return hit
        held = peak = 0
        for c in t[2:]:
            if isinstance(c, tuple) and c[0] not in ("in", "const"):
                peak = max(peak, held + need(c))
                if _is_op(c, shared) or c[0] in ("iota", "Gather", "Cast"):
                    held += _itemsize(c)
        memo[id(t)] = out = max(peak, held + _itemsize(t))
        return out

    return need(tree) + sum(_itemsize(t) for t in shared)


def _itemsize(t) -> int:
    """Bytes an element of the array node ``t`` computes (0 for an input or a literal)."""
    if t[0] in ("in", "const"):
        return 0
    d = dt.BY_NAME.get(t[1]) if isinstance(t[1], str) else None
    return 8 if d is None else np.dtype(_compute_dtype(d)).itemsize  # (iota: int64 coordinates)


def _program_bytes(program) -> int:
    """Bytes of the buffers a tree program allocates when the plan's arena does not give them."""
    return sum(Request(tuple(s), d).nbytes for s, d in zip(program.buffer_shapes, program.buffer_dtypes))


def compile_tree(tree, out_shape_fn):
    """A function (args, dims) -> ndarray evaluating an LLIR expression tree with NumPy.
    ``args`` are the kernel's inputs already read through their views. A subtree that occurs
    several times is computed once a call (its value memoised in a dict passed after the args)."""
    shared = _repeated(tree)
    fn = _compile(tree, out_shape_fn, shared)
    if not shared:
        return fn
    return lambda args, dims: fn([*args, {}], dims)


def _compile(tree, out_shape_fn, shared):
    fn = _compile_node(tree, out_shape_fn, shared)
    slot = shared.get(tree)
    if slot is None:
        return fn

    def memo(args, dims):
        m = args[-1]
        v = m.get(slot)
        if v is None:
            v = m[slot] = fn(args, dims)
        return v

    return memo


def _compile_node(tree, out_shape_fn, shared):
    tag = tree[0]
    if tag == "in":
        k = tree[1]
        return lambda args, dims: args[k]
    if tag == "const":
        v = np.asarray(tree[1], dtype=_compute_dtype(dt.BY_NAME[tree[2]]))
        return lambda args, dims: v
    if tag == "iota":
        fn = compile_np(tree[1])
        axis_of = coordinate_axis(tree[1])

        def iota(args, dims):
            shape = out_shape_fn(dims)
            axis = axis_of(shape, dims) if axis_of is not None else None
            if axis is not None:  # one axis's coordinate: a row that broadcasts (a join's test)
                return coordinate_row(shape, axis)
            n = int(np.prod(shape)) if shape else 1
            z = np.arange(n, dtype=np.int64)
            return np.broadcast_to(np.asarray(fn({**dims, "z": z})), (n,)).astype(np.int32).reshape(shape)

        return iota
    d = dt.BY_NAME[tree[1]]
    cd = _compute_dtype(d)
    if tag == "Cast":
        a = _compile(tree[2], out_shape_fn, shared)
        if d is dt.bool_:
            return lambda args, dims: np.not_equal(a(args, dims), 0)
        if d is dt.int32:
            def to_int(args, dims):
                x = a(args, dims)
                return float_to_int32(x) if x.dtype.kind == "f" else x.astype(np.int32)
            return to_int
        if cd != _np_dtype(d):  # a cast to half precision rounds, even inside a tree
            hd = _np_dtype(d)
            return lambda args, dims: np.asarray(a(args, dims)).astype(hd).astype(cd)
        return lambda args, dims: np.asarray(a(args, dims)).astype(cd)
    if tag == "np.not":
        a = _compile(tree[2], out_shape_fn, shared)
        return lambda args, dims: np.logical_not(a(args, dims))
    if tag in PREDICATE_NAMES:  # a float test: the operand as it is, a bool result
        fn = getattr(np, PREDICATE_NAMES[tag])
        a = _compile(tree[2], out_shape_fn, shared)
        return lambda args, dims: fn(a(args, dims))
    if tag in _NP_UNARY or tag == "Recip":
        fn = _NP_UNARY.get(tag, _recip)
        a = _compile(tree[2], out_shape_fn, shared)
        if cd == np.float32 and _is_op(tree[2], shared):
            # the operand is this tree's own temporary: overwrite it (no allocation, less traffic)
            def unary_inplace(args, dims):
                x = a(args, dims)
                if type(x) is np.ndarray and x.dtype == cd and x.ndim:
                    return fn(x, out=x)
                return fn(np.asarray(x, dtype=cd))

            return unary_inplace
        return lambda args, dims: fn(np.asarray(a(args, dims), dtype=cd))
    if tag in BINARY or tag in ("Mod", "LessThan"):
        fn = _fmod if tag == "Mod" else getattr(np, UFUNC_NAMES.get(tag, "less"))
        ta, tb = tree[2], tree[3]
        q = quotient(tree)
        if q is not None:  # a * recip(b): one rounding, as NumPy's a / b
            fn, (ta, tb) = np.divide, q
        a, b = _compile(ta, out_shape_fn, shared), _compile(tb, out_shape_fn, shared)
        if tag == "LessThan":
            return lambda args, dims: fn(a(args, dims), b(args, dims))
        own_a, own_b = _is_op(ta, shared), _is_op(tb, shared)
        if cd == np.float32 and tag in ("Add", "Mul") and (own_a or own_b):

            def binary_inplace(args, dims):
                x = np.asarray(a(args, dims), dtype=cd)
                y = np.asarray(b(args, dims), dtype=cd)
                full = out_shape_fn(dims)
                if own_a and x.shape == full and x.ndim:  # a temporary of the full shape
                    return fn(x, y, out=x)
                if own_b and y.shape == full and y.ndim:
                    return fn(x, y, out=y)
                return fn(x, y)

            return binary_inplace
        return lambda args, dims: fn(np.asarray(a(args, dims), dtype=cd), np.asarray(b(args, dims), dtype=cd))
    if tag == "Select":
        c, x, y = (_compile(t, out_shape_fn, shared) for t in tree[2:5])
        return lambda args, dims: select(c(args, dims), np.asarray(x(args, dims), dtype=cd),
                                         np.asarray(y(args, dims), dtype=cd))
    if tag == "Gather":
        k = tree[2]
        idx = _compile(tree[3], out_shape_fn, shared)

        def gather(args, dims):
            data = np.ascontiguousarray(args[k]).reshape(-1)
            i = np.asarray(idx(args, dims))
            return data[np.clip(i, 0, max(data.size - 1, 0))]

        return gather
    raise NotImplementedError(f"fused tree op {tag!r}")


def _join_step(tree, readers, od, shape, general):
    """The kernel of an exact join (ir/join_plan.py), np.concatenate's work: each input's part
    between its limits written once into its slice of the result (zeros first only where the
    part pads), instead of the select over inputs padded to the whole shape; else None. At dims
    where the limits come out of order, ``general`` (the select) runs."""
    edges = [getattr(r, "edge", None) for r in readers]
    if None in edges or any(e[3] is None or np.dtype(e[3]) != od for e in edges):
        return None
    plan = join_planner(tree, [e[1] for e in edges], shape)
    if plan is None:
        return None
    srcs = [e[0] for e in edges]

    def writes(at):
        """[(src, slice of the result, strides, offset, mask, zeros first)] of a plan."""
        axis, pieces = at
        out, pos = [], 0
        for i, (shape, strides, offset, mask) in pieces:
            where = tuple(slice(pos, pos + n) if k == axis else slice(None) for k, n in enumerate(shape))
            pos += shape[axis]
            if mask is None:
                mask = tuple((0, n) for n in shape)
            lo, hi = View.mask_bounds(shape, mask)
            pads = any(a > 0 or b < n for a, b, n in zip(lo, hi, shape))
            out.append((srcs[i], where, strides, offset, mask, pads))
        return out

    def run(vals, shape, steps):
        out = np.empty(shape, od)
        for src, where, strides, offset, mask, pads in steps:
            part = out[where]
            if pads:
                part.fill(0)
            write_region(part, vals[src], strides, offset, mask)
        return out

    if plan.static:  # every decode-step join: planned once, here
        at = plan({})
        if at is None:
            return None
        steps = writes(at)
        return lambda vals, dims: run(vals, shape, steps)

    def join(vals, dims):
        at = plan(dims)
        if at is None:
            return general(vals, dims)
        return run(vals, plan.shape_of(dims), writes(at))

    return join


def coordinate_row(shape, axis: int) -> np.ndarray:
    """0..shape[axis]-1 along ``axis``, shaped to broadcast against ``shape``."""
    return np.arange(shape[axis], dtype=np.int32).reshape(tuple(n if k == axis else 1 for k, n in enumerate(shape)))


def _at_shape(x, shape):
    """``x`` broadcast to ``shape`` (a read-only view), or ``x`` itself when it already has that
    shape (np.broadcast_to costs ~3 us, more than the small ufuncs of a decode step)."""
    if type(x) is np.ndarray and x.shape == shape:
        return x
    return np.broadcast_to(x, shape)


def _shape_fn(shape):
    if all(isinstance(d, int) for d in shape):
        return lambda dims: shape
    return compile_py_tuple(shape)


def _program(node, readers, tree, full_shape):
    """``(program, compact readers)`` when the tree takes the straight-line path of
    tree_program (static shapes, unpadded views, float32/64, int32 and bool), else None."""
    if not all(isinstance(d, int) for d in full_shape) or node.dtype.name not in PROGRAM_DTYPES:
        return None
    reads, shapes, dtypes = [], [], []
    for r in readers:
        edge = getattr(r, "edge", None)
        if edge is None or edge[3] is None:
            return None
        src, view, pshape, pdtype = edge
        read = compact_reader(src, view, pshape, dt.to_numpy(pdtype))
        if read is None:
            return None
        reads.append(read)
        shapes.append(compact_view(view, pshape)[0])
        dtypes.append(pdtype)
    stash = node.attrs.get("_stash", ())
    fn = compile_program(tree, shapes, dtypes, node.dtype.name, keep=[t for t, _ in stash])
    return None if fn is None else (fn, reads)


def _with_stash(node, program, reads):
    """The program as ``(vals, bufs=()) -> root``: values it keeps for later kernels (plan_share's
    stash) are stored in ``vals`` under their ids on the way; ``bufs`` are its buffers when the
    plan's arena provides them."""
    ids = [vid for _, vid in node.attrs.get("_stash", ())]
    if not ids:
        return lambda vals, bufs=(): program(*[r(vals) for r in reads], *bufs)

    def run(vals, bufs=()):
        root, *kept = program(*[r(vals) for r in reads], *bufs)
        for vid, value in zip(ids, kept):
            vals[vid] = value
        return root

    return run


def _program_requests(node, program) -> list:
    """One arena request per buffer of the program: the kept values under their stash ids, the
    rest scratch (the caller names the root's buffer when the root is the node's value)."""
    kept = {b: vid for b, (_, vid) in zip(program.kept_buffers, node.attrs.get("_stash", ()))
            if b is not None}
    return [Request(tuple(shape), dtype, kept.get(j))
            for j, (shape, dtype) in enumerate(zip(program.buffer_shapes, program.buffer_dtypes))]


def _no_stash(node):
    if "_stash" in node.attrs:
        raise RuntimeError(f"NumPy backend: kernel %{node.id} should keep values for later kernels "
                           "but its tree left the straight-line path (plan_share and tree_program "
                           "disagree on eligibility)")


@kernel("fused")
def _fused(node, readers):
    shape_fn = _shape_fn(node.shape)
    tree = rewrite(node.attrs["expr"])
    od = dt.to_numpy(node.dtype)
    fast = _program(node, readers, tree, node.shape)
    if fast is not None:
        program, reads = fast
        run = _with_stash(node, program, reads)
        shape = tuple(node.shape)
        requests = _program_requests(node, program)
        if program.root_is_temp and program.root_shape == shape:
            def fused_program(vals, dims):
                return run(vals)  # a fresh array of the node's shape

            def into(vals, dims, bufs):
                return run(vals, bufs)  # the root's buffer is the node's value

            if program.root_buffer is not None:  # else a 0-d root: nothing to keep
                requests[program.root_buffer] = Request(shape, np.dtype(od), node.id)
        else:
            def fused_program(vals, dims):
                return np.array(np.broadcast_to(run(vals), shape), dtype=od, order="C", copy=True)

            def into(vals, dims, bufs):
                out = bufs[-1]
                np.copyto(out, run(vals, bufs[:-1]))
                return out

            requests.append(Request(shape, np.dtype(od), node.id))

        step = _guarded(fused_program)  # Plan runs the raw form inside its one errstate
        step.program = program
        step.scratch_bytes = lambda dims: _program_bytes(program)  # (asked once a candidate)
        if shape and (program.root_buffer is not None or not program.root_is_temp
                      or program.root_shape != shape):
            step.into, step.requests = into, tuple(requests)
        return step
    _no_stash(node)
    fn = compile_tree(tree, shape_fn)

    def raw(vals, dims):
        out = _at_shape(fn([r(vals, dims) for r in readers], dims), shape_fn(dims))
        return np.asarray(out, dtype=od, order="C")  # keeps 0-d

    join = _join_step(tree, readers, od, tuple(node.shape), raw)  # writes its pieces: no scratch
    step = _guarded(join or raw)  # Plan runs the raw form inside its one errstate
    if join is None:
        step.scratch_bytes = lambda dims: tree_temp_bytes(tree) * math.prod(shape_fn(dims))
    return step


@kernel("fused_reduce")
def _fused_reduce(node, readers):
    in_shape_fn = _shape_fn(tuple(node.attrs["in_shape"]))
    tree = rewrite(node.attrs["expr"])
    axis = node.attrs["axis"]
    op = node.attrs["reduce"]
    od = dt.to_numpy(node.dtype)
    acc = np.float32 if node.dtype.is_float else od
    init = -np.inf if node.dtype.is_float else np.iinfo(np.int32).min
    fast = _program(node, readers, tree, tuple(node.attrs["in_shape"]))
    if fast is not None:
        program, reads = fast
        run = _with_stash(node, program, reads)
        in_shape = tuple(node.attrs["in_shape"])
        full = program.root_shape == in_shape

        def reduce_program(vals, dims, bufs=(), out=None):
            x = run(vals, bufs)
            if not full:
                x = np.broadcast_to(x, in_shape)
            if op == "sum":  # the ufunc's own reduce: np.sum / np.max minus their wrappers
                r = add_reduce(x, axis, acc, out=out)
            else:
                r = np.maximum.reduce(x, axis=axis, initial=init, out=out)
            return r if out is not None else np.asarray(r).astype(od, copy=False)

        step = _guarded(reduce_program)
        step.program = program
        step.scratch_bytes = lambda dims: _program_bytes(program)  # (asked once a candidate)
        shape = tuple(node.shape)
        reduced = tuple(d for j, d in enumerate(in_shape) if j != axis % len(in_shape))
        if np.dtype(od) == np.dtype(acc) and shape and reduced == shape:
            step.requests = (*_program_requests(node, program), Request(shape, np.dtype(od), node.id))
            step.into = lambda vals, dims, bufs: reduce_program(vals, dims, bufs[:-1], bufs[-1])
        return step
    _no_stash(node)
    fn = compile_tree(tree, in_shape_fn)

    def raw(vals, dims):
        x = _at_shape(fn([r(vals, dims) for r in readers], dims), in_shape_fn(dims))
        if op == "sum":
            out = add_reduce(x, axis, acc)
        else:
            out = np.max(x, axis=axis, initial=init)
        return np.asarray(out).astype(od, copy=False)

    step = _guarded(raw)
    step.scratch_bytes = lambda dims: tree_temp_bytes(tree) * math.prod(in_shape_fn(dims))
    return step


@kernel("matmul")
def _matmul(node, readers):
    ra, rb = readers
    od = dt.to_numpy(node.dtype)
    cd = _compute_dtype(node.dtype)

    def step(vals, dims, out=None):
        a, b = ra(vals, dims), rb(vals, dims)
        if a.dtype != cd or b.dtype != cd:
            a, b = a.astype(cd), b.astype(cd)
        if out is not None:
            return np.matmul(a, b, out=out)
        return np.matmul(a, b).astype(od, copy=False)

    shape = tuple(node.shape)
    if np.dtype(od) == np.dtype(cd) and all(isinstance(d, int) for d in shape):
        step.requests = (Request(shape, np.dtype(od), node.id),)
        step.into = lambda vals, dims, bufs: step(vals, dims, bufs[0])
    return step


__all__ = ["compile_tree", "KERNELS"]

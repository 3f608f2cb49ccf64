"""The NumPy backend's LLIR kernels: fused trees, fused reductions and np.matmul."""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ...ir.expr import compile_np
from .executor import KERNELS, _compute_dtype, _fmod, _guarded, kernel
from .tree_peephole import rewrite
from .tree_program import UFUNC_NAMES, compact_reader, compact_view, compile_program

# the unary ufuncs of the tree programs' table (Recip keeps its integer case below)
_NP_UNARY = {op: getattr(np, name) for op, name in UFUNC_NAMES.items()
             if op not in ("Add", "Mul", "Recip")}


def _recip(x, out=None):
    if x.dtype.kind == "f":
        return np.reciprocal(x, out=out)
    return (1.0 / x).astype(x.dtype)


def _is_op(tree) -> bool:
    """True when the subtree computes a fresh array this tree owns (not an input or a literal)."""
    return tree[0] not in ("in", "const", "iota", "Gather", "Cast")


def compile_tree(tree, out_shape_fn):
    """A function (args, dims) -> ndarray evaluating an LLIR expression tree with NumPy.
    ``args`` are the kernel's inputs already read through their views."""
    tag = tree[0]
    if tag == "in":
        k = tree[1]
        return lambda args, dims: args[k]
    if tag == "const":
        v = np.asarray(tree[1], dtype=_compute_dtype(dt.BY_NAME[tree[2]]))
        return lambda args, dims: v
    if tag == "iota":
        fn = compile_np(tree[1])

        def iota(args, dims):
            shape = out_shape_fn(dims)
            n = int(np.prod(shape)) if shape else 1
            z = np.arange(n, dtype=np.int64)
            return np.broadcast_to(np.asarray(fn({**dims, "z": z})), (n,)).astype(np.int32).reshape(shape)

        return iota
    d = dt.BY_NAME[tree[1]]
    cd = _compute_dtype(d)
    if tag == "Cast":
        a = compile_tree(tree[2], out_shape_fn)
        if d is dt.bool_:
            return lambda args, dims: np.not_equal(a(args, dims), 0)
        if d is dt.int32:
            def to_int(args, dims):
                x = a(args, dims)
                if x.dtype.kind == "f":
                    with np.errstate(invalid="ignore"):
                        # saturate in float64 (float32 cannot hold 2**31 - 1)
                        x = np.clip(np.nan_to_num(np.asarray(x, np.float64), nan=0), -(2**31), 2**31 - 1)
                return x.astype(np.int32)
            return to_int
        return lambda args, dims: np.asarray(a(args, dims)).astype(cd)
    if tag in _NP_UNARY or tag == "Recip":
        fn = _NP_UNARY.get(tag, _recip)
        a = compile_tree(tree[2], out_shape_fn)
        if cd == np.float32 and _is_op(tree[2]):
            # the operand is this tree's own temporary: overwrite it (no allocation, less traffic)
            def unary_inplace(args, dims):
                x = a(args, dims)
                if type(x) is np.ndarray and x.dtype == cd and x.ndim:
                    return fn(x, out=x)
                return fn(np.asarray(x, dtype=cd))

            return unary_inplace
        return lambda args, dims: fn(np.asarray(a(args, dims), dtype=cd))
    if tag in ("Add", "Mul", "Mod", "LessThan"):
        fn = {"Add": np.add, "Mul": np.multiply, "Mod": _fmod, "LessThan": np.less}[tag]
        a, b = compile_tree(tree[2], out_shape_fn), compile_tree(tree[3], out_shape_fn)
        if tag == "LessThan":
            return lambda args, dims: fn(a(args, dims), b(args, dims))
        if cd == np.float32 and tag in ("Add", "Mul") and (_is_op(tree[2]) or _is_op(tree[3])):
            own_a, own_b = _is_op(tree[2]), _is_op(tree[3])

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
        c, x, y = (compile_tree(t, out_shape_fn) for t in tree[2:5])
        return lambda args, dims: np.where(c(args, dims), x(args, dims), y(args, dims)).astype(cd, copy=False)
    if tag == "Gather":
        k = tree[2]
        idx = compile_tree(tree[3], out_shape_fn)

        def gather(args, dims):
            data = np.ascontiguousarray(args[k]).reshape(-1)
            i = np.asarray(idx(args, dims))
            return data[np.clip(i, 0, max(data.size - 1, 0))]

        return gather
    raise NotImplementedError(f"fused tree op {tag!r}")


def _shape_fn(shape):
    if all(isinstance(d, int) for d in shape):
        return lambda dims: shape
    return lambda dims: tuple(d if isinstance(d, int) else d.evaluate(dims) for d in shape)


def _program(node, readers, tree, full_shape):
    """``(program, compact readers)`` when the tree takes the straight-line path of
    tree_program (static shapes, unmasked views, one float dtype), else None."""
    if not all(isinstance(d, int) for d in full_shape) or node.dtype.name not in ("float32", "float64"):
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
    """The program as ``vals -> root``: values it keeps for later kernels (plan_share's stash)
    are stored in ``vals`` under their ids on the way."""
    ids = [vid for _, vid in node.attrs.get("_stash", ())]
    if not ids:
        return lambda vals: program(*[r(vals) for r in reads])

    def run(vals):
        root, *kept = program(*[r(vals) for r in reads])
        for vid, value in zip(ids, kept):
            vals[vid] = value
        return root

    return run


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
        if program.root_is_temp and program.root_shape == shape:
            def fused_program(vals, dims):
                return run(vals)  # a fresh array of the node's shape
        else:
            def fused_program(vals, dims):
                return np.array(np.broadcast_to(run(vals), shape), dtype=od, order="C", copy=True)

        step = _guarded(fused_program)  # Plan runs the raw form inside its one errstate
        step.program = program
        return step
    _no_stash(node)
    fn = compile_tree(tree, shape_fn)

    def step(vals, dims):
        args = [r(vals, dims) for r in readers]
        with np.errstate(all="ignore"):
            out = fn(args, dims)
        return np.asarray(np.broadcast_to(out, shape_fn(dims)), dtype=od, order="C")  # keeps 0-d

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

        def reduce_program(vals, dims):
            x = run(vals)
            if not full:
                x = np.broadcast_to(x, in_shape)
            if op == "sum":  # the ufunc's own reduce: np.sum / np.max minus their wrappers
                return np.asarray(np.add.reduce(x, axis=axis, dtype=acc)).astype(od, copy=False)
            return np.asarray(np.maximum.reduce(x, axis=axis, initial=init)).astype(od, copy=False)

        step = _guarded(reduce_program)
        step.program = program
        return step
    _no_stash(node)
    fn = compile_tree(tree, in_shape_fn)

    def step(vals, dims):
        args = [r(vals, dims) for r in readers]
        with np.errstate(all="ignore"):
            x = np.broadcast_to(fn(args, dims), in_shape_fn(dims))
            if op == "sum":
                out = np.sum(x, axis=axis, dtype=acc)
            else:
                out = np.max(x, axis=axis, initial=init)
        return np.asarray(out).astype(od, copy=False)

    return step


@kernel("matmul")
def _matmul(node, readers):
    ra, rb = readers
    od = dt.to_numpy(node.dtype)
    cd = _compute_dtype(node.dtype)

    def step(vals, dims):
        a, b = ra(vals, dims), rb(vals, dims)
        if a.dtype != cd:
            a, b = a.astype(cd), b.astype(cd)
        return np.matmul(a, b).astype(od, copy=False)

    return step


__all__ = ["compile_tree", "KERNELS"]

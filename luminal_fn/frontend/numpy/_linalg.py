"""Products: matmul and friends are broadcast Mul + SumReduce (the optimizer finds the GEMMs)."""
from __future__ import annotations

import string

from ...ir import dtypes as dt
from ...ir.expr import as_expr, minimum as emin, maximum as emax, same, to_int_or_expr
from ...ir.view import View
from ..errors import ShapeError
from ..tracer import (Tracer, _ctx_of, binary, broadcast_shapes, broadcast_to, cast, lift,
                      materialize, normalize_axis, reduce, reshape_any)
from ._shape import expand_dims, transpose


def _promote_pair(a: Tracer, b: Tracer):
    d = dt.promote(a.dtype, b.dtype)
    if d.is_bool:
        d = dt.int32
    return cast(a, d), cast(b, d)


def _as_bool_if(out: Tracer, *inputs) -> Tracer:
    """Products of bool arrays are bool in NumPy (and, or-reduced)."""
    if inputs and all(t.dtype.is_bool for t in inputs):
        return cast(out, dt.bool_)
    return out


def matmul(a, b):
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: operands must be at least 1-D, got shapes {a.shape} and {b.shape}")
    inputs = (a, b)
    a, b = _promote_pair(a, b)
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = expand_dims(a, 0)
    if vb:
        b = expand_dims(b, 1)
    M, K = a.shape[-2], a.shape[-1]
    K2, N = b.shape[-2], b.shape[-1]
    if not same(K, K2):
        raise ShapeError(f"matmul: contraction dims differ: {a.shape} @ {b.shape} ({K} vs {K2})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], op="matmul")
    # (..., M, K) -> (..., M, N, K);  (..., K, N) -> (..., N, K) -> (..., M, N, K)
    ae = broadcast_to(expand_dims(a, -2), batch + (M, N, K))
    bt = transpose(b, tuple(range(b.ndim - 2)) + (b.ndim - 1, b.ndim - 2))
    be = broadcast_to(expand_dims(bt, -3), batch + (M, N, K))
    out = reduce("SumReduce", binary("Mul", ae, be, opname="matmul"), len(batch) + 2)
    if va:
        out = reshape_any(out, out.shape[:-2] + out.shape[-1:])
    if vb:
        out = reshape_any(out, out.shape[:-1])
    return _as_bool_if(out, *inputs)


def dot(a, b):
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    if a.ndim == 0 or b.ndim == 0:
        return binary("Mul", a, b)
    if b.ndim <= 2:
        return matmul(a, b)
    # dot(a, b)[i, j, k, m] = sum(a[i, j, :] * b[k, :, m])
    return tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 2]))


def vdot(a, b):
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    return inner(reshape_any(a, (a.size,)), reshape_any(b, (b.size,)))


def vecdot(x1, x2, axis=-1):
    """NumPy 2's vecdot: the dot product of vectors along ``axis``, the other axes broadcast."""
    ctx = _ctx_of(x1, x2)
    a, b = lift(x1, ctx), lift(x2, ctx)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"vecdot: operands must be at least 1-D, got shapes {a.shape} and {b.shape}")
    shape = broadcast_shapes(a.shape, b.shape, op="vecdot")
    ax = normalize_axis(axis, len(shape), "vecdot")
    k = ax - len(shape)  # the vectors' axis, counted from the end in both (it is not broadcast)
    if -k > min(a.ndim, b.ndim) or not same(a.shape[k], b.shape[k]):
        raise ShapeError(f"vecdot: the vectors along axis {axis} of shapes {a.shape} and {b.shape} "
                         "must have one length (only the other axes broadcast)")
    inputs = (a, b)
    a, b = _promote_pair(a, b)
    out = reduce("SumReduce", binary("Mul", broadcast_to(a, shape), broadcast_to(b, shape), opname="vecdot"), ax)
    return _as_bool_if(out, *inputs)


def matvec(x1, x2):
    """NumPy 2's matvec: (..., m, n) matrices times (..., n) vectors -> (..., m)."""
    ctx = _ctx_of(x1, x2)
    a, v = lift(x1, ctx), lift(x2, ctx)
    if a.ndim < 2 or v.ndim < 1:
        raise ShapeError(f"matvec: needs a matrix (>= 2-D) and a vector (>= 1-D), got shapes {a.shape} and {v.shape}")
    out = matmul(a, expand_dims(v, -1))
    return reshape_any(out, out.shape[:-1])


def vecmat(x1, x2):
    """NumPy 2's vecmat: (..., n) vectors times (..., n, m) matrices -> (..., m)."""
    ctx = _ctx_of(x1, x2)
    v, a = lift(x1, ctx), lift(x2, ctx)
    if v.ndim < 1 or a.ndim < 2:
        raise ShapeError(f"vecmat: needs a vector (>= 1-D) and a matrix (>= 2-D), got shapes {v.shape} and {a.shape}")
    out = matmul(expand_dims(v, -2), a)
    return reshape_any(out, out.shape[:-2] + out.shape[-1:])


def inner(a, b):
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    if a.ndim == 0 or b.ndim == 0:
        return binary("Mul", a, b)
    return tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 1]))


def outer(a, b):
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    a = reshape_any(a, (a.size, 1))
    b = reshape_any(b, (1, b.size))
    return binary("Mul", a, b, opname="outer")


def tensordot(a, b, axes=2):
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    if isinstance(axes, int):
        ax_a = list(range(a.ndim - axes, a.ndim))
        ax_b = list(range(axes))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, int) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, int) else list(ax_b)
    ax_a = [normalize_axis(x, a.ndim, "tensordot") for x in ax_a]
    ax_b = [normalize_axis(x, b.ndim, "tensordot") for x in ax_b]
    if len(ax_a) != len(ax_b):
        raise ShapeError("tensordot: axes lists differ in length")
    for i, j in zip(ax_a, ax_b):
        if not same(a.shape[i], b.shape[j]):
            raise ShapeError(f"tensordot: shape mismatch for sum ({a.shape} axis {i} vs {b.shape} axis {j})")
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [j for j in range(b.ndim) if j not in ax_b]
    letters = iter(string.ascii_letters)
    la = [None] * a.ndim
    lb = [None] * b.ndim
    for i, j in zip(ax_a, ax_b):
        c = next(letters)
        la[i] = lb[j] = c
    for i in free_a:
        la[i] = next(letters)
    for j in free_b:
        lb[j] = next(letters)
    out = "".join(la[i] for i in free_a) + "".join(lb[j] for j in free_b)
    return einsum(f"{''.join(la)},{''.join(lb)}->{out}", a, b)


def diagonal(a, offset=0, axis1=0, axis2=1):
    a = lift(a, _ctx_of(a))
    i1, i2 = normalize_axis(axis1, a.ndim, "diagonal"), normalize_axis(axis2, a.ndim, "diagonal")
    if i1 == i2:
        raise ShapeError("diagonal: axis1 and axis2 cannot be the same")
    if a._view.mask is not None:
        a = materialize(a)
    v = a._view
    n1, n2 = v.shape[i1], v.shape[i2]
    s1, s2 = v.strides[i1], v.strides[i2]
    if offset >= 0:
        length = emax(emin(as_expr(n1), as_expr(n2) - offset), 0)
        start = as_expr(v.offset) + as_expr(s2) * offset
    else:
        length = emax(emin(as_expr(n1) + offset, as_expr(n2)), 0)
        start = as_expr(v.offset) + as_expr(s1) * (-offset)
    keep = [k for k in range(a.ndim) if k not in (i1, i2)]
    shape = tuple(v.shape[k] for k in keep) + (to_int_or_expr(length),)
    strides = tuple(v.strides[k] for k in keep) + (to_int_or_expr(as_expr(s1) + s2),)
    return Tracer(a._ctx, a._node, View(shape, strides, to_int_or_expr(start), None), a.dtype, a.weak)


def einsum(subscripts, *operands, optimize=None):
    """Einstein summation over one or two operands (any number by folding pairwise)."""
    ctx = _ctx_of(*operands)
    ops = [lift(o, ctx) for o in operands]
    return _as_bool_if(_einsum(subscripts, ops), *ops)


def _einsum(subscripts, ops):
    if not isinstance(subscripts, str):
        raise ShapeError("einsum: only the subscripts-string form is supported")
    sub = subscripts.replace(" ", "")
    if "->" in sub:
        lhs, out = sub.split("->")
    else:
        lhs = sub
        counts = {}
        for c in lhs.replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        out = "".join(sorted(c for c, k in counts.items() if k == 1 and c != "."))
    terms = lhs.split(",")
    if len(terms) != len(ops):
        raise ShapeError(f"einsum: {len(terms)} operand subscripts for {len(ops)} operands")
    for t in terms + [out]:
        bad = [c for c in t.replace("...", "") if not c.isalpha()]
        if bad or t.replace("...", "").count(".") or ("." in t and "..." not in t):
            raise ShapeError(f"einsum: invalid subscripts {subscripts!r}")
    if len(set(out.replace("...", ""))) != len(out.replace("...", "")):
        raise ShapeError(f"einsum: output subscripts {out!r} repeat a letter")
    if "." in sub:
        terms, out = _expand_ellipsis(terms, out, ops, implicit="->" not in sub)
    # take repeated letters within one operand as diagonals
    for k, (t, o) in enumerate(zip(terms, ops)):
        while len(set(t)) != len(t):
            c = next(ch for ch in t if t.count(ch) > 1)
            i = t.index(c)
            j = t.index(c, i + 1)
            o = diagonal(o, 0, i, j)
            t = "".join(ch for n, ch in enumerate(t) if n not in (i, j)) + c
        terms[k], ops[k] = t, o
        if o.ndim != len(t):
            raise ShapeError(f"einsum: operand {k} has {o.ndim} dims but subscripts {t!r}")
    while len(ops) > 1:
        # contract the first two; keep letters needed later
        rest = "".join(terms[2:]) + out
        keep = "".join(dict.fromkeys(c for c in terms[0] + terms[1] if c in rest))
        ops = [_einsum2(terms[0], ops[0], terms[1], ops[1], keep)] + ops[2:]
        terms = [keep] + terms[2:]
    t, o = terms[0], ops[0]
    # sum letters not in the output, then order as the output says
    for c in [c for c in t if c not in out][::-1]:
        i = t.index(c)
        o = reduce("SumReduce", cast(o, dt.int32) if o.dtype.is_bool else o, i)
        t = t[:i] + t[i + 1:]
    if sorted(t) != sorted(out):
        raise ShapeError(f"einsum: output subscripts {out!r} name letters not in the inputs")
    return transpose(o, [t.index(c) for c in out]) if t != out else o


def _einsum2(ta, a, tb, b, keep):
    a, b = _promote_pair(a, b)
    letters = "".join(dict.fromkeys(ta + tb))
    sizes = {}
    for t, o in ((ta, a), (tb, b)):
        for c, d in zip(t, o.shape):
            if c in sizes and not same(sizes[c], d) and not same(d, 1) and not same(sizes[c], 1):
                raise ShapeError(f"einsum: letter {c!r} has sizes {sizes[c]} and {d}")
            if c not in sizes or same(sizes[c], 1):
                sizes[c] = d
    # summed letters last so the reduce axes are innermost
    summed = [c for c in letters if c not in keep]
    order = [c for c in letters if c in keep] + summed
    full = tuple(sizes[c] for c in order)
    pa = _align(a, ta, order, full)
    pb = _align(b, tb, order, full)
    prod_ = binary("Mul", pa, pb, opname="einsum")
    kept = [c for c in order if c in keep]
    out = prod_
    for i in range(len(order) - 1, len(kept) - 1, -1):
        out = reduce("SumReduce", out, i)
    return transpose(out, [kept.index(c) for c in keep]) if kept != list(keep) else out


def _align(x, t, order, full):
    present = [c for c in order if c in t]
    x = transpose(x, [t.index(c) for c in present]) if present != list(t) else x
    for i, c in enumerate(order):
        if c not in t:
            x = expand_dims(x, i)
    return broadcast_to(x, full)


def _expand_ellipsis(terms, out, ops, implicit):
    nd = 0
    for t, o in zip(terms, ops):
        if "..." in t:
            nd = max(nd, o.ndim - (len(t) - 3))
    fill = "".join(c for c in string.ascii_uppercase if c not in "".join(terms) + out)[:nd]
    new_terms = []
    for t, o in zip(terms, ops):
        if "..." in t:
            k = o.ndim - (len(t) - 3)
            if k < 0:
                raise ShapeError(f"einsum: subscripts {t!r} name more dims than operand shape {o.shape}")
            t = t.replace("...", fill[nd - k:])
        new_terms.append(t)
    if "..." in out:
        out = out.replace("...", fill)
    elif implicit and nd:
        out = fill + out
    return new_terms, out


def kron(a, b):
    ctx = _ctx_of(a, b)
    a, b = lift(a, ctx), lift(b, ctx)
    nd = max(a.ndim, b.ndim)
    a = reshape_any(a, (1,) * (nd - a.ndim) + a.shape)
    b = reshape_any(b, (1,) * (nd - b.ndim) + b.shape)
    ae = a
    be = b
    for i in range(nd):
        ae = expand_dims(ae, 2 * i + 1)
        be = expand_dims(be, 2 * i)
    p = binary("Mul", ae, be, opname="kron")
    return reshape_any(p, tuple(to_int_or_expr(as_expr(x) * y) for x, y in zip(a.shape, b.shape)))


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002
    """numpy.linalg.norm: vector norms (any p, 0, +-inf) and the matrix norms that need no SVD
    (None/'fro', 1, -1, inf, -inf)."""
    from . import _math as m
    from ._reduce import max as rmax, min as rmin, sum as rsum

    x = lift(x, _ctx_of(x))
    if not x.dtype.is_float:
        x = cast(x, dt.float32)
    nd = x.ndim
    if axis is None:
        if ord is None:
            return _keep(m.sqrt(rsum(m.square(x))), tuple(range(nd)), nd, keepdims)
        if nd not in (1, 2):
            raise ShapeError(f"norm: ord={ord!r} needs a 1-D or 2-D array or an axis, got shape {x.shape}")
        axis = tuple(range(nd))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(normalize_axis(a_, nd, "norm") for a_ in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"norm: repeated axis in {axis}")
    ax = abs_ = m.absolute(x)
    if len(axes) == 1:
        (k,) = axes
        if ord is None or ord == 2:
            r = m.sqrt(rsum(m.square(x), axis=k))
        elif ord == float("inf"):
            r = rmax(ax, axis=k)
        elif ord == float("-inf"):
            r = rmin(ax, axis=k)
        elif isinstance(ord, str):
            raise ShapeError(f"norm: ord={ord!r} is a matrix norm; a vector norm takes a number")
        elif ord == 0:
            r = rsum(cast(m.not_equal(x, 0), x.dtype), axis=k)
        elif ord == 1:
            r = rsum(abs_, axis=k)
        else:
            p = float(ord)
            r = m.power(rsum(m.power(abs_, p), axis=k), 1.0 / p)
        return _keep(r, axes, nd, keepdims)
    if len(axes) != 2:
        raise ShapeError(f"norm: axis must name 1 or 2 dims, got {axis!r}")
    r0, c0 = axes
    if ord is None or ord == "fro":
        r = m.sqrt(rsum(m.square(x), axis=axes))
    elif ord in (1, -1):
        s = rsum(abs_, axis=r0, keepdims=True)
        r = (rmax if ord == 1 else rmin)(s, axis=c0, keepdims=True)
        r = rsum(r, axis=axes)  # drop the two size-1 axes
    elif ord in (float("inf"), float("-inf")):
        s = rsum(abs_, axis=c0, keepdims=True)
        r = (rmax if ord > 0 else rmin)(s, axis=r0, keepdims=True)
        r = rsum(r, axis=axes)
    else:
        raise ShapeError(f"norm: matrix ord={ord!r} is not supported (None, 'fro', 1, -1, inf, -inf; "
                         "2, -2 and 'nuc' need an SVD)")
    return _keep(r, axes, nd, keepdims)


def _keep(r, axes, nd, keepdims):
    if not keepdims:
        return r
    it = iter(r.shape)
    return reshape_any(r, tuple(1 if i in axes else next(it) for i in range(nd)))


def trace_(a, offset=0, axis1=0, axis2=1):
    from ._reduce import sum as rsum

    return rsum(diagonal(a, offset, axis1, axis2), axis=-1)


"""Joins written exactly: a float Add of two zero-padded reads that tile one axis (the front end's
concatenate, stack and roll, and where's stacked halves where no select replaced them) becomes a
select on the position along that axis.

The Add is exact for every value but one: -0.0 plus the other piece's padding (+0.0) is +0.0, so
``concatenate([a, b])`` gave 0.0 where ``a`` held -0.0. The select reads the same inputs and
returns each element as it is. Pieces may be padded reads, a piece times a finite literal (RoPE's
``-x2`` inlined under its padding) and joins themselves (three or more pieces). Outside every
piece both forms read padding: the select is used there only when the two pieces' padding has the
same sign (their sum is then that zero too) or when the pieces cover the whole index space.
A user's own ``pad(a) + pad(b)`` that tiles an axis is the same graph, read as the join too: a
-0.0 of ``a`` stays -0.0 there, where NumPy's sum of the padded arrays gives +0.0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..ir.expr import as_expr, floordiv, mod, prod, same, var
from ..ir.memo import Memo

_FLOATS = ("float32", "float64", "float16", "bfloat16")


@dataclass(frozen=True)
class _Piece:
    """A subtree that is zero outside ``box`` (a (lo, hi) interval per axis of the kernel's index
    space); ``negative_zero``: that zero is -0.0."""

    box: tuple
    negative_zero: bool


def join_tree(tree, views: list, producers: Optional[list] = None):
    """(tree, piece): ``tree`` (a fused kernel's expression, its input ``k`` read through
    ``views[k]``) with each float Add of two pieces that tile an axis written as a select (the
    tree itself when none), and the _Piece the whole tree is, else None. ``producers[k]``: the
    _Piece that input k's producer kernel is, for a plain read of it (a join in another kernel)."""
    if not views:
        return tree, None
    producers = tuple(producers or [None] * len(views))
    # Every extraction of a search writes the same kernels' trees again (a quarter of a Llama
    # extraction's time): kept by the tree's text (which, unlike tuple equality, tells -0.0 from
    # 0.0 and 1 from 1.0 and True). An unchanged tree comes back as the caller's own object.
    text = repr(tree)
    if len(text) > JOINED_TEXT_MAX:  # (a big tree is rewritten, not kept)
        return _join_tree(tree, views, producers)
    key = (text, tuple(views), producers)
    new, piece = _JOINED.get(key, lambda: _kept_join(tree, views, producers))
    return (tree if new is None else new), piece


def _kept_join(tree, views, producers) -> tuple:
    new, piece = _join_tree(tree, views, producers)
    return (None if new is tree else new), piece


JOINED_TEXT_MAX = 8192  # characters of the largest tree kept
# (tree text, views, producers) -> (the new tree or None: unchanged, piece); a Llama search
# meets a few hundred trees
_JOINED = Memo(2048)


def _join_tree(tree, views, producers):
    shape = tuple(views[0].shape)
    memo: dict = {}

    def walk(t):
        hit = memo.get(id(t))
        if hit is None:
            hit = memo[id(t)] = _rewrite(t, walk, views, producers, shape)
        return hit

    return walk(tree)


def _rewrite(t, walk, views, producers, shape):
    """(new tree, its _Piece or None)."""
    tag = t[0]
    if tag == "in":
        v = views[t[1]]
        if v.mask is not None and len(v.shape) == len(shape):
            return t, _Piece(tuple(v.mask), False)
        made = producers[t[1]]
        plain = v.mask is None and v.is_contiguous and tuple(v.shape) == shape
        return t, (made if plain and made is not None and len(made.box) == len(shape) else None)
    if tag in ("const", "iota", "Gather"):
        return t, None  # (a gather's index tree is integer arithmetic: no signed zeros)
    kids = [walk(c) for c in t[2:]]
    new = (tag, t[1]) + tuple(k[0] for k in kids)
    if all(k[0] is c for k, c in zip(kids, t[2:])):
        new = t  # unchanged below: the same object (subtrees met twice stay one)
    if tag == "Add" and t[1] in _FLOATS:
        joined = _join(kids[0], kids[1], shape, t[1])
        if joined is not None:
            return joined
    if tag == "Cast" and t[1] in _FLOATS and kids[0][1] is not None:
        return new, kids[0][1]  # (a cast to a float keeps a zero a zero of its sign: the same piece)
    if tag == "Mul" and t[1] in _FLOATS:
        for (tree, piece), (other, _) in ((kids[0], kids[1]), (kids[1], kids[0])):
            c = other[1] if other[0] == "const" else None
            if piece is not None and isinstance(c, (int, float)) and math.isfinite(c):
                # zero times a finite literal is a zero, its sign flipped by a negative one
                flip = math.copysign(1.0, c) < 0
                return new, _Piece(piece.box, piece.negative_zero != flip)
    return new, None


def _join(a, b, shape, dtype: str):
    """(select tree, _Piece) when pieces a and b tile one axis between them, else None."""
    (ta, pa), (tb, pb) = a, b
    if pa is None or pb is None:
        return None
    differ = [k for k, (x, y) in enumerate(zip(pa.box, pb.box)) if not (same(x[0], y[0]) and same(x[1], y[1]))]
    if len(differ) != 1:
        return None
    axis = differ[0]
    (alo, ahi), (blo, bhi) = pa.box[axis], pb.box[axis]
    if same(ahi, blo):
        first, second, boundary, span = ta, tb, ahi, (alo, bhi)
    elif same(bhi, alo):
        first, second, boundary, span = tb, ta, bhi, (blo, ahi)
    else:
        return None
    box = pa.box[:axis] + (span,) + pa.box[axis + 1:]
    covers = all(same(lo, 0) and same(hi, n) for (lo, hi), n in zip(box, shape))
    if not covers and pa.negative_zero != pb.negative_zero:
        return None  # outside both pieces the sum is +0.0, the select one piece's -0.0
    stride = prod(shape[axis + 1:])
    coord = floordiv(var("z"), stride) if axis == 0 else mod(floordiv(var("z"), stride), shape[axis])
    bound = as_expr(boundary)
    limit = ("const", bound.value, "int32") if bound.is_const else ("iota", bound)
    cond = ("LessThan", "bool", ("iota", as_expr(coord)), limit)
    return ("Select", dtype, cond, first, second), _Piece(box, pa.negative_zero)


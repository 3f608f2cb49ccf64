"""How a backend runs an exact join (optimize/exact_joins.py) without its select: each input's
part between its limits along the position's axis, read once and laid side by side (what
np.concatenate does), instead of every input padded to the whole shape and a condition read.

A fused tree ``where(p < k1, a, where(p < k2, b, c))`` (nested on either side) selects, along
the axis that the position ``p`` counts, a's padded read below k1, b's between k1 and k2 and c's
from k2 on. Reading each part through its view restricted to that range gives the same values
whatever the pieces' regions are, so no tiling check is needed; only the limits must come out
in order (else the backend runs the select).
"""
from __future__ import annotations

from typing import Callable

from .expr import as_expr, compile_np, compile_py_tuple, coordinate_axis
from .view import View


def join_chain(tree):
    """``(position iota expr, [input index, ...], [limit tree, ...])`` for a fused tree that is
    a chain of selects on one position's ``p < limit`` over plain inputs (a limit is an int
    literal or a position-free iota), in order along the axis; else None."""
    chain = _links(tree)
    return chain if chain is not None and chain[2] else None


def _links(tree):
    if tree[0] == "in":
        return None, [tree[1]], []
    if tree[0] != "Select" or tree[2][0] != "LessThan":
        return None
    position, limit = tree[2][2], tree[2][3]
    if position[0] != "iota" or not (
            (limit[0] == "const" and type(limit[1]) is int)
            or (limit[0] == "iota" and "z" not in as_expr(limit[1]).free_symbols())):
        return None
    below, above = _links(tree[3]), _links(tree[4])
    if below is None or above is None or any(p not in (None, position[1]) for p in (below[0], above[0])):
        return None
    return position[1], below[1] + above[1], below[2] + [limit] + above[2]


def join_planner(tree, views: list, shape: tuple) -> Callable | None:
    """For a join tree over inputs read through ``views`` (one per kernel input) with output
    ``shape`` (ints and symbolic dims): a function dims -> ``(axis, [(input index, (shape,
    strides, offset, mask)), ...])`` of the non-empty parts in order, or None at dims where the
    limits are out of order or the position is no axis of the output; None when the tree is no
    join. Its ``static`` attribute says the parts are the same at every dims (static views, int
    limits and shape): a backend then plans them once, when the kernel is built; ``shape_of``
    gives the output's shape at dims."""
    chain = join_chain(tree)
    if chain is None:
        return None
    position, inputs, limits = chain
    axis_of = coordinate_axis(position)
    if axis_of is None:
        return None
    limit_fns = [compile_np(t[1]) if t[0] == "iota" else (lambda dims, k=t[1]: k) for t in limits]
    parts_fns = [_parts_function(views[i]) for i in inputs]
    static_shape = all(isinstance(n, int) for n in shape)
    shape_of = (lambda dims, s=tuple(shape): s) if static_shape else compile_py_tuple(shape)

    def plan(dims):
        out_shape = shape_of(dims)
        axis = axis_of(out_shape, dims)
        if axis is None:
            return None
        bounds = [0] + [int(f(dims)) for f in limit_fns] + [out_shape[axis]]
        if any(b > c for b, c in zip(bounds, bounds[1:])):
            return None
        pieces = []
        for i, parts, start, stop in zip(inputs, parts_fns, bounds, bounds[1:]):
            view_parts = parts(dims)
            if tuple(view_parts[0]) != out_shape:
                return None
            if stop > start:
                pieces.append((i, View.axis_part(*view_parts, axis, start, stop)))
        return axis, pieces

    plan.static = static_shape and all(views[i].is_static() for i in inputs) and all(t[0] == "const" for t in limits)
    plan.shape_of = shape_of  # dims -> the output's shape
    return plan


def _parts_function(view: View) -> Callable:
    if view.is_static():
        parts = tuple(view.shape), tuple(view.strides), view.offset, view.mask
        return lambda dims: parts
    return view.parts_function()

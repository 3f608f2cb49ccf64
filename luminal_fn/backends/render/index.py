"""Index arithmetic for kernels: coalescing dims, coordinates of a flat index, view addresses
and mask tests, all rendered as C integer code from symbolic Expressions.

Dims are referred to in rendered code as ``d_<name>`` (kernels load them first from the dims
table); every other integer comes from the view Expressions with ``render(e, "c")``.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

from ...ir.expr import Expr, as_expr, render, same
from ...ir.view import View, contiguous_strides

INT_LIMIT = 2**31 - 1


def dim_names(symbols: Sequence[str]) -> dict:
    return {s: f"d_{s}" for s in symbols}


def r(e, names: dict) -> str:
    """Render an int or an Expr as C code (dims through ``names``)."""
    if isinstance(e, int):
        return str(e) if e >= 0 else f"({e})"
    return render(e, "c", names)


def is_zero(e) -> bool:
    return same(e, 0)


def is_one(e) -> bool:
    return same(e, 1)


def mask_trivial(view: View, axis: int) -> bool:
    """True when the mask of one axis keeps the whole axis (or there is no mask)."""
    if view.mask is None:
        return True
    lo, hi = view.mask[axis]
    return same(lo, 0) and same(hi, view.shape[axis])


def coalesce(shape: Sequence, views: Sequence[View], keep: int | None = None):
    """Merge adjacent dims that every view walks contiguously (and none masks).

    Returns (shape, views) with fewer dims; size-1 dims are dropped. ``keep`` names one axis that
    is never merged (the reduced axis); its new position is returned as a third value."""
    shape = list(shape)
    vs = [list(zip(v.shape, v.strides, [None] * len(v.shape) if v.mask is None else list(v.mask)))
          for v in views]
    # drop size-1 dims (their index is always 0; a mask on them is folded into validity below)
    dims = []  # (size, [(stride, mask) per view], is_keep)
    for k, d in enumerate(shape):
        if same(d, 1) and k != keep:
            # a size-1 dim whose mask excludes index 0 makes the view read zero: keep it then
            if any(m[k][2] is not None and not (same(m[k][2][0], 0) and not same(m[k][2][1], 0))
                   for m in vs):
                dims.append((d, [(m[k][1], m[k][2]) for m in vs], False))
            continue
        dims.append((d, [(m[k][1], m[k][2]) for m in vs], k == keep))
    out: list = []
    for d, per, kp in dims:
        if out and not kp and not out[-1][2]:
            pd, pper, _ = out[-1]
            ok = True
            for (ps, pm), (s, m) in zip(pper, per):
                if pm is not None and not (same(pm[0], 0) and same(pm[1], pd)):
                    ok = False
                    break
                if m is not None and not (same(m[0], 0) and same(m[1], d)):
                    ok = False
                    break
                if not same(ps, as_expr(s) * d):
                    ok = False
                    break
            if ok:
                nd = as_expr(pd) * d
                nd = nd.args[0] if nd.op == "const" else nd
                out[-1] = (nd, [(s, None) for (s, _m) in per], False)
                continue
        out.append((d, per, kp))
    new_shape = tuple(d for d, _, _ in out)
    new_views = []
    for j, v in enumerate(views):
        strides = tuple(per[j][0] for _, per, _ in out)
        masks = [per[j][1] for _, per, _ in out]
        mask = None
        if any(m is not None for m in masks):
            mask = tuple(m if m is not None else (0, d) for m, d in zip(masks, new_shape))
        new_views.append(View(new_shape, strides, v.offset, mask))
    keep_pos = next((i for i, (_, _, kp) in enumerate(out) if kp), None)
    if keep is not None:
        return new_shape, new_views, keep_pos
    return new_shape, new_views


def coords(shape: Sequence, flat: str, names: dict, prefix: str, itype: str) -> tuple:
    """C statements computing the coordinates of ``flat`` over ``shape`` (row-major) into
    variables ``<prefix>0..``; returns (lines, coordinate names)."""
    n = len(shape)
    if n == 0:
        return [], []
    if n == 1:
        return [f"const {itype} {prefix}0 = {flat};"], [f"{prefix}0"]
    lines = [f"{itype} {prefix}_r = {flat};"]
    cs = [""] * n
    for k in range(n - 1, 0, -1):
        d = r(shape[k], names)
        lines.append(f"const {itype} {prefix}{k} = {prefix}_r % {d}; {prefix}_r /= {d};")
        cs[k] = f"{prefix}{k}"
    lines.append(f"const {itype} {prefix}0 = {prefix}_r;")
    cs[0] = f"{prefix}0"
    return lines, cs


def address(view: View, cs: Sequence[str], names: dict, skip: Sequence[int] = ()) -> str:
    """offset + sum(c_k * stride_k) as C code (dims in ``skip`` left out)."""
    terms = []
    if not is_zero(view.offset):
        terms.append(r(view.offset, names))
    for k, (c, s) in enumerate(zip(cs, view.strides)):
        if k in skip or is_zero(s):
            continue
        terms.append(c if is_one(s) else f"{c} * {r(s, names)}")
    return " + ".join(terms) if terms else "0"


def validity(view: View, cs: Sequence[str], names: dict, skip: Sequence[int] = ()) -> str | None:
    """The mask test of a view at coordinates ``cs`` (None when every index is valid)."""
    if view.mask is None:
        return None
    conds = []
    for k, (lo, hi) in enumerate(view.mask):
        if k in skip or mask_trivial(view, k):
            continue
        if same(lo, hi) or (isinstance(lo, int) and isinstance(hi, int) and hi <= lo):
            return "false"
        if not is_zero(lo):
            conds.append(f"{cs[k]} >= {r(lo, names)}")
        conds.append(f"{cs[k]} < {r(hi, names)}")
    return " && ".join(conds) if conds else None


def axis_valid(view: View, axis: int, c: str, names: dict) -> str | None:
    if view.mask is None or mask_trivial(view, axis):
        return None
    lo, hi = view.mask[axis]
    conds = [] if is_zero(lo) else [f"{c} >= {r(lo, names)}"]
    conds.append(f"{c} < {r(hi, names)}")
    return " && ".join(conds)


def numel(shape: Sequence):
    if all(type(d) is int for d in shape):
        return math.prod(shape)
    return _symbolic_numel(tuple(shape))


@functools.lru_cache(maxsize=4096)  # (a search plans the same symbolic shapes candidate after candidate)
def _symbolic_numel(shape: tuple):
    n = as_expr(1)
    for d in shape:
        n = n * d
    return n.args[0] if n.op == "const" else n


def max_value(e, dims_max: dict | None) -> int | None:
    """An upper bound for an int/Expr when dims take the values of ``dims_max``."""
    if isinstance(e, int):
        return e
    if isinstance(e, Expr) and e.op == "const":
        return e.args[0]
    if not dims_max:
        return None
    try:
        return e.evaluate(dims_max)
    except (KeyError, ZeroDivisionError):
        return None


def index_type(sizes: Sequence, dims_max: dict | None) -> str:
    """"int" when every flat index and address stays below 2^31, else "long long"."""
    for s in sizes:
        v = max_value(s, dims_max)
        if v is None or abs(v) > INT_LIMIT:
            return "long long" if v is not None else "int"
    return "int"


@functools.lru_cache(maxsize=4096)
def view_extent(view: View):
    """The largest address a view can touch + 1 (offset plus sum of (d-1)*|stride|)."""
    e = as_expr(view.offset)
    for d, s in zip(view.shape, view.strides):
        e = e + (as_expr(d) - 1) * s
    return e + 1


__all__ = ["coalesce", "coords", "address", "validity", "axis_valid", "dim_names", "r", "numel",
           "index_type", "max_value", "contiguous_strides", "mask_trivial", "view_extent"]

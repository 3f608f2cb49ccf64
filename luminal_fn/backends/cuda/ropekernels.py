"""The RoPE kinds on CUDA (kernels/rope.cu), one thread per rotated pair (y[d], y[d + half]):

- ``rope_half``, offered by optimize/rules/specialize_rope.egg (semantics in
  backends/numpy/rope_kernels.py): x, cos, sin and the traced literal neg; cos and sin either
  full width or the half tables (both elements of a pair then read one entry);
- ``rope``, attr-driven (x, cos, sin and a style attr; no rule offers it).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.expr import as_expr
from ...ir.memo import Memo
from ...ir.view import View, contiguous_strides
from ..render import index as ix
from ..render.kernels import BLOCK, gtid
from ..render.lang import load_expr, store_expr
from .handkernels import hand_source
from .plan import lowerer
from .rowkernels import _scalar_operand


def _static_even_last(node, kind) -> int:
    D = tuple(node.shape)[-1]
    if not isinstance(D, int) or D % 2:
        raise NotImplementedError(f"{kind} kernel: the last dim must be a static even size, got "
                                  f"{D} (shape {tuple(node.shape)})")
    return D


def _pair_operand(pl, node, k, pshape, step, pair, half_ok=False):
    """(buffer, dtype, view over the pairs, distance to the pair's second element or None when
    both elements read one entry) of input k, materialised when masked or a literal."""
    view = node.inputs[k][1]
    if view.mask is not None or pl.kernel_input(node, k).scalar is not None:
        b, view = pl.materialize(node, k)
    else:
        b = pl.input_buf(node, k)
    dtype = pl.graph.nodes[node.inputs[k][0]].dtype
    last = view.strides[-1]
    if half_ok and view.shape[-1] == pshape[-1]:  # a half table (the last dim is static)
        return b, dtype, View(pshape, tuple(view.strides), view.offset), None
    pv = View(pshape, tuple(view.strides[:-1]) + (as_expr(last) * step,), view.offset)
    return b, dtype, pv, as_expr(last) * pair


@dataclass(frozen=True)
class PairStores:
    """The stores of a pair kernel's body: lines ``line`` and ``line + 1`` write y1 at ``out[ao]``
    and y2 at ``out[ao + pair]`` (flat indices of the output, of C type ``itype``)."""

    line: int
    itype: str
    pair: int


@dataclass(frozen=True)
class PairFunction:
    """How a pair kernel's body becomes a function of one pair (gemv_stores.py: RoPE computed
    where the GEMV before it has both elements): ``loop`` is the body's grid-stride loop line over
    the pair index ``i`` (C type ``itype``); inside it, operand 0's two elements are read by the
    C expressions ``x`` (x1, x2); ``pair`` is the distance between a pair's two output elements
    (D / 2 for rotate_half, 1 for the interleaved style)."""

    loop: str
    x: tuple
    itype: str
    pair: int


def _render_pairs(pl, node, kind, operands, step, pair, call, extra_bufs=(), meta=None):
    """A grid-stride loop over the pairs: loads both elements of each operand, calls
    ``call(values)`` (C code assigning float y1, y2) and stores y1 at the pair's first output
    element, y2 ``pair`` elements after it."""
    specs = tuple((dtype, pv, dist) for _b, dtype, pv, dist in operands)
    args = (tuple(node.shape), node.dtype, specs, step, pair, tuple(sorted(pl.dims_max.items())),
            tuple(pl.symbols))
    key = (pl.lang.name, id(pl.lang)) + args
    # (the Language is kept in the value: the key names it by id)
    head, inner, vals, itype, tail, n = _PAIR_LOOPS.get(key, lambda: (pl.lang, _pair_loop(pl.lang, *args)))[1]
    bufs = [(f"in{k}", f"b{k}", dtype, True) for k, (dtype, _pv, _dist) in enumerate(specs)]
    ids = [b for b, *_ in operands]
    for buf in extra_bufs:
        bufs.append(buf[0])
        ids.append(buf[1])
    inner = list(inner) + [call(vals)] + list(tail)
    # where the two stores sit in the body, for rope_store.py to send them elsewhere
    stores = PairStores(len(head) + len(inner) - 2, itype, pair)
    body = list(head) + ["  " + ln for ln in inner] + ["}"]
    meta = {**(meta or {}), "_pair_fn": PairFunction(head[-1], vals[0], itype, pair)}
    bufs.append(("out", "out", node.dtype, False))
    ids.append(pl.node_buf[node.id])
    src = hand_source(pl, kind, body, bufs, BLOCK, n, BLOCK, meta={**meta, "_pair_stores": stores})
    pl.add_kernel(src, ids, node.id, kind)


_PAIR_LOOPS = Memo(256)  # (language, shape, dtype, operands, ...) -> (the Language, _pair_loop's result)


def _pair_loop(lang, shape, out_dtype, specs, step, pair, dims_max, symbols) -> tuple:
    """The index arithmetic of a pair kernel, kept by _render_pairs (a Llama plan has two RoPE
    kernels a layer, the same each candidate): (the lines opening the loop, its lines before the
    call, the operands' (first, second) value expressions, the index type, the two stores, the
    pair count)."""
    pshape = shape[:-1] + (shape[-1] // 2,)
    views = [pv for _d, pv, _dist in specs]
    ostr = contiguous_strides(shape)
    views.append(View(pshape, tuple(ostr[:-1]) + (step,), 0))
    cshape, cviews = ix.coalesce(pshape, views)
    nm = ix.dim_names(list(symbols))
    dims = dict(dims_max)
    n = ix.numel(pshape)
    itype = ix.index_type([ix.numel(shape)] + [ix.view_extent(v) for v in views], dims)
    g, stride = gtid(lang, itype)
    head = [f"const {itype} n = {ix.r(n, nm)};", f"for ({itype} i = {g}; i < n; i += {stride}) {{"]
    cl, cs = ix.coords(cshape, "i", nm, "c", itype)
    inner = list(cl)
    vals = []
    for k, (dtype, _pv, dist) in enumerate(specs):
        inner.append(f"const {itype} a{k} = {ix.address(cviews[k], cs, nm)};")
        first = load_expr(lang, dtype, f"b{k}[a{k}]")
        if dist is None:
            inner.append(f"const float v{k} = {first};")
            vals.append((f"v{k}", f"v{k}"))
        else:
            vals.append((first, load_expr(lang, dtype, f"b{k}[a{k} + {ix.r(dist, nm)}]")))
    inner.append(f"const {itype} ao = {ix.address(cviews[-1], cs, nm)};")
    inner.append("float y1, y2;")
    tail = [f"out[ao] = {store_expr(lang, out_dtype, 'y1', 'float')};",
            f"out[ao + {pair}] = {store_expr(lang, out_dtype, 'y2', 'float')};"]
    return tuple(head), tuple(inner), tuple(vals), itype, tuple(tail), n


@lowerer("rope_half")
def lower_rope_half(pl, node):
    D = _static_even_last(node, "rope_half")
    pshape = tuple(node.shape)[:-1] + (D // 2,)
    ops = [_pair_operand(pl, node, k, pshape, 1, D // 2, half_ok=k > 0) for k in range(3)]
    extra, ids = [], []
    neg = _scalar_operand(pl, node, 3, extra, ids)

    def call(v):
        (x1, x2), (c1, c2), (s1, s2) = v
        return f"lf_rope_half_pair({x1}, {x2}, {c1}, {s1}, {c2}, {s2}, {neg}, y1, y2);"

    _render_pairs(pl, node, "rope_half", ops, 1, D // 2, call, list(zip(extra, ids)))


@lowerer("rope")
def lower_rope(pl, node):
    style = node.attrs.get("style", "half")
    if style not in ("half", "interleaved"):
        raise ValueError(f"rope: style must be 'half' or 'interleaved', got {style!r}")
    D = _static_even_last(node, "rope")
    step, pair = (1, D // 2) if style == "half" else (2, 1)
    pshape = tuple(node.shape)[:-1] + (D // 2,)
    ops = [_pair_operand(pl, node, k, pshape, step, pair) for k in range(3)]

    def call(v):
        (x1, x2), (c1, c2), (s1, s2) = v
        return f"lf_rope_pair({x1}, {x2}, {c1}, {s1}, {c2}, {s2}, y1, y2);"

    _render_pairs(pl, node, "rope", ops, step, pair, call, meta={"style": style})


__all__ = ["PairFunction", "PairStores", "lower_rope", "lower_rope_half"]

"""The shared C-style kernel renderer: signatures, elementwise (scalar and vector paths) and
scatter kernels. Reductions live in reduce.py. Everything language-specific comes from a
:class:`~.lang.Language` table.

A rendered kernel is a :class:`KernelSource`: its text (without the language prelude), its
launch shape (threads per block and the amount of parallel work, from which the host derives a
grid-stride grid), and the order of its arguments: buffers by role ("in0", "out", ...), then
the symbolic dims it reads. Sources do not depend on where buffers live, so the compiled
kernel is shared by every graph and bucket that needs the same code.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Sequence

from ...ir import dtypes as dt
from ...ir.expr import Expr, as_expr, same
from ...ir.llir import literal_tree
from ...ir.memo import Memo
from ...ir.view import View
from . import index as ix
from .lang import Language, compute_type, convert, load_expr, store_expr
from .tree import TreeRenderer, gather_inputs, leaf_inputs, substitute_inputs, tree_has

BLOCK = 256


@dataclass
class KernelInput:
    """One input edge as a kernel sees it: its view, dtype, and a scalar value when the
    producer is a scalar Constant (then it is inlined and takes no buffer)."""

    view: View
    dtype: dt.DType
    scalar: object = None

    @property
    def inlined(self) -> bool:
        return self.scalar is not None and self.view.mask is None


@dataclass
class KernelSource:
    name: str
    text: str
    kind: str
    buffers: list  # roles in argument order: "in<k>", "out", "scratch"
    dims: list  # symbol names in argument order
    block: int = BLOCK
    work: object = 1  # int/Expr: parallel items; the grid is ceil(work / per_block) (capped)
    per_block: int = BLOCK
    grid_cap: int | None = 0  # None: no cap (one block per item); 0: the backend's default cap
    shared_bytes: int = 0
    meta: dict = field(default_factory=dict)


def finish(lang: Language, kind: str, body: list, bufs: list, block: int, work, per_block: int,
           grid_cap=0, meta=None, shared_bytes: int = 0) -> KernelSource:
    """Wrap a body into a kernel: signature, buffer and dim bindings, a content-derived name.

    ``bufs`` is [(role, C name, dtype, const)]."""
    # the body and bindings as given, for plan passes that render kernels together
    meta = {"_body": list(body), "_bufs": list(bufs), **(meta or {})}
    # A search plans candidate after candidate of mostly the same kernels: the text and name are
    # kept by what they depend on (a Llama plan wraps ~370 bodies, a sixth of its planning).
    key = (lang.name, id(lang), kind, tuple(body), tuple(bufs), block, bool(meta.get("waits_inside")),
           meta.get("min_blocks"))
    # (lang is kept in the value: the key names it by id)
    _, name, text, syms = _FINISHED.get(key, lambda: (lang, *_wrap(lang, kind, body, bufs, block, meta)))
    return KernelSource(name, text, kind, [b[0] for b in bufs], list(syms),
                        block, work, per_block, grid_cap, shared_bytes, meta)


_FINISHED = Memo(4096)  # finish's wrapped kernels: (Language, name, text, dims read)


def _wrap(lang: Language, kind: str, body: list, bufs: list, block: int, meta: dict) -> tuple:
    """(name, text, the symbolic dims read) of ``body`` wrapped into a kernel."""
    text_body = "\n".join("  " + ln for ln in body)
    syms = sorted(set(re.findall(r"\bd_([A-Za-z_][A-Za-z0-9_]*)\b", text_body)))
    syms = [s for s in syms if f"d_{s}" in text_body]
    lines = []
    if lang.binding == "table":
        params = ["const long long* __restrict__ P"]
        params += [f"const int a{j}" for j in range(len(bufs))]
        params += [f"const int dd{j}" for j in range(len(syms))]
        pre = [f"{lang.ptr(d, c)} {cname} = ({lang.ptr(d, c).replace(' __restrict__', '')})P[a{j}];"
               for j, (_role, cname, d, c) in enumerate(bufs)]
        pre += [f"const int d_{s} = (int)P[dd{j}];" for j, s in enumerate(syms)]
        # P is written before the step's first kernel, so reading it needs no wait
        entry = [lang.entry_launch] if meta.get("waits_inside") else [lang.entry_launch, lang.entry_wait]
        pre += [e for e in entry if e]
    else:
        params = [f"{lang.ptr(d, c)} {cname} [[buffer({j})]]" for j, (_r, cname, d, c) in enumerate(bufs)]
        params.append(f"constant int* lf_dims [[buffer({len(bufs)})]]")
        params.append(lang.extra_params)
        pre = [f"const int d_{s} = lf_dims[{j}];" for j, s in enumerate(syms)]
    # meta["min_blocks"]: the blocks an SM must hold at once (__launch_bounds__'s second value),
    # so ptxas may give a thread 65536 / (block * min_blocks) registers instead of its own cap
    # (which spilled the split attention kernel)
    n = f"{block}, {meta['min_blocks']}" if meta.get("min_blocks") else block
    bounds = (lang.launch_bounds.format(n=n) + " ") if lang.launch_bounds else ""
    lines.append(f"{lang.kernel_prefix} {bounds}@NAME@({', '.join(params)}) {{")
    lines += ["  " + p for p in ([lang.trace_in] if lang.trace_in else []) + pre]
    lines.append(text_body)
    if lang.trace_out:
        lines.append("  " + lang.trace_out.format(id="@ID@"))
    lines.append("}")
    text = "\n".join(lines)
    digest = hashlib.sha1((lang.name + text).encode()).hexdigest()[:12]
    name = f"lf_{kind}_{digest}"
    return name, text.replace("@NAME@", name).replace("@ID@", digest), tuple(syms)


def view_read(lang: Language, d: dt.DType, buf: str, view, cs, names) -> tuple:
    """(expression, compute type) of buffer ``buf`` (dtype ``d``) read through ``view`` at the
    coordinate expressions ``cs``: zero where the view's mask cuts."""
    ct = compute_type(d)
    val = load_expr(lang, d, f"{buf}[{ix.address(view, cs, names)}]")
    cond = ix.validity(view, cs, names)
    return (f"(({cond}) ? {val} : {zero_of(ct)})" if cond is not None else val), ct


def consumer_store(lang: Language, tree, inputs, links: dict, shape, out_dtype: dt.DType, names, itype: str,
                   coord: str = "c") -> tuple:
    """An elementwise consumer computed where its producer stores (a reduction's or a GEMV's
    epilogue): (the lines computing element ``n`` of ``tree`` over ``inputs`` and writing out[n],
    the (role, C name, dtype, const) bindings of the inputs read from memory, named e<k>). The
    ``links`` (input index -> (C expression, compute type)) are the producer's values, given as
    its store would read them back; every other input is read through its view at the
    consumer's coordinates of n (``coord`` names them)."""
    cl, cs = ix.coords(shape, "n", names, coord, itype)

    def leaf(k):
        if k in links:
            return links[k]
        return view_read(lang, inputs[k].dtype, f"e{k}", inputs[k].view, cs, names)

    tr = TreeRenderer(lang, leaf, None, lambda e: f"(int)({ix.r(e, {**names, 'z': 'n'})})", prefix="v")
    val, vt = tr.render(tree)
    cto = compute_type(out_dtype)
    lines = cl + tr.lines + [f"out[n] = {store_expr(lang, out_dtype, convert(lang, val, vt, cto), cto)};"]
    bufs = [(f"e{k}", f"e{k}", inputs[k].dtype, True) for k in sorted(leaf_inputs(tree)) if k not in links]
    return lines, bufs


def gtid(lang: Language, itype: str) -> tuple:
    """(global thread id, grid stride) expressions."""
    b, t, bd, gd = lang.block_idx, lang.thread_idx, lang.block_dim, lang.grid_dim
    return (f"({itype}){b} * {bd} + {t}", f"({itype}){bd} * {gd}")


def inline_scalars(tree, inputs: Sequence[KernelInput]):
    mapping = {k: literal_tree(inp.scalar, inp.dtype.name) for k, inp in enumerate(inputs) if inp.inlined}
    return substitute_inputs(tree, mapping) if mapping else tree


def zero_of(ct: str) -> str:
    return {"float": "0.0f", "int": "0", "bool": "false"}[ct]


def _gather_fn(lang, inputs, names, itype, lines_holder):
    """A Gather callback reading input k as its logical flat array at a clamped index."""
    counter = [0]

    def gather(k: int, idx: str):
        inp = inputs[k]
        v = inp.view
        n = ix.numel(v.shape)
        j = counter[0]
        counter[0] += 1
        p = f"g{j}_"
        out = lines_holder()
        nn = ix.r(n, names)
        out.append(f"{itype} {p}i = ({itype})({idx}); {p}i = {p}i < 0 ? 0 : ({p}i >= {nn} ? {nn} - 1 : {p}i);")
        cl, cs = ix.coords(v.shape, f"{p}i", names, p + "c", itype)
        out.extend(cl)
        val, ct = view_read(lang, inp.dtype, f"b{k}", v, cs, names)
        if not isinstance(n, int) or n > 0:
            return (f"({nn} > 0 ? {val} : {zero_of(ct)})" if not isinstance(n, int) else val), ct
        return zero_of(ct), ct

    return gather


def _buffers(inputs, used: set, out_dtype) -> list:
    bufs = [(f"in{k}", f"b{k}", inp.dtype, True) for k, inp in enumerate(inputs)
            if k in used and not inp.inlined]
    bufs.append(("out", "out", out_dtype, False))
    return bufs


# ---- elementwise ------------------------------------------------------------------------------------
def render_elementwise(lang: Language, out_shape: Sequence, out_dtype: dt.DType, tree,
                       inputs: Sequence[KernelInput], dims_max: dict | None = None,
                       symbols: Sequence[str] = (), vector: bool | None = None) -> KernelSource:
    """out[i] = tree evaluated at output index i, for every i of the (contiguous) output."""
    names = ix.dim_names(symbols or _symbols_of(out_shape, inputs, tree))
    tree = inline_scalars(tree, inputs)
    leaves = sorted(leaf_inputs(tree))
    gathers = gather_inputs(tree)
    used = set(leaves) | gathers
    n = ix.numel(out_shape)
    views = [inputs[k].view for k in leaves]
    shape, cviews = ix.coalesce(out_shape, views) if views else ((n,), [])
    if not views:
        shape = (n,) if not (isinstance(n, int) and n == 1) else (1,)
    vmap = dict(zip(leaves, cviews))
    sizes = [n] + [ix.view_extent(v) for v in views] + [ix.view_extent(inputs[k].view) for k in gathers]
    itype = ix.index_type(sizes, dims_max)
    ct_out = compute_type(out_dtype)
    vec = _vector_width(lang, shape, vmap, inputs, out_dtype, tree) if vector is not False else 0
    body: list = []
    if vec:
        body += _vector_body(lang, shape, vmap, inputs, out_dtype, tree, names, itype, vec, n)
        work = as_expr(n) // vec if not isinstance(n, int) else n // vec
        work = work if isinstance(work, int) else ix.numel([work])
    else:
        g, stride = gtid(lang, itype)
        body.append(f"const {itype} n = {ix.r(n, names)};")
        body.append(f"for ({itype} i = {g}; i < n; i += {stride}) {{")
        inner: list = []
        cl, cs = ix.coords(shape, "i", names, "c", itype)
        if leaves:
            inner += cl

        def leaf(k):
            return view_read(lang, inputs[k].dtype, f"b{k}", vmap[k], cs, names)

        tr = TreeRenderer(lang, leaf, _gather_fn(lang, inputs, names, itype, lambda: tr.lines),
                          lambda e: f"(int)({ix.r(e, {**names, 'z': 'i'})})")
        val, vt = tr.render(tree)
        inner += tr.lines
        inner.append(f"out[i] = {store_expr(lang, out_dtype, convert(lang, val, vt, ct_out), ct_out)};")
        body += ["  " + ln for ln in inner]
        body.append("}")
        work = n
    bufs = _buffers(inputs, used, out_dtype)
    return finish(lang, "ew", body, bufs, BLOCK, work, BLOCK * (1 if not vec else 1),
                  meta={"vector": vec, "index": itype})


def _symbols_of(shape, inputs, tree=None) -> list:
    """The dims a kernel reads (when its caller names none): those of its shape, of its inputs'
    views (masks included) and of the tree's iota expressions."""
    syms: set = set()

    def add(x):
        if isinstance(x, Expr):
            syms.update(x.free_symbols())
        elif isinstance(x, tuple):
            for y in x:
                add(y)

    add(tuple(shape))
    for inp in inputs:
        v = inp.view
        add((tuple(v.shape), tuple(v.strides), v.offset, v.mask or ()))
    add(tree)
    return sorted(syms - {"z"})


def _multiple(e, v: int) -> bool:
    if isinstance(e, int):
        return e % v == 0
    return same(as_expr(e) % v, 0)


def _access(view: View, last: int, v: int) -> str | None:
    """How the vector path reads ``view``: "vec" (one aligned V-wide load, its mask tested once
    for the vector), "scalar" (one value for the whole vector), "lanes" (each element loaded
    alone under its own mask test: a piece boundary or a shift that is no whole vector, which
    one aligned load cannot serve), or None (a strided last axis: the scalar path)."""
    s = view.strides[last]
    if not (same(s, 1) or same(s, 0)):
        return None
    # (bounds at multiples of V: a vector is wholly inside or outside, a join's pieces)
    whole = ix.mask_trivial(view, last) or all(_multiple(b, v) for b in view.mask[last])
    if same(s, 0) and whole:
        return "scalar"
    aligned = _multiple(view.offset, v) and all(_multiple(st, v) for st in view.strides[:last])
    return "vec" if whole and aligned else "lanes"


def _vector_width(lang, shape, vmap, inputs, out_dtype, tree) -> int:
    """V elements per thread when the output's rows are whole vectors (the store stays one
    aligned V-wide write) and every input is read along its last axis, else 0."""
    if not lang.vec_ok or not shape or tree_has(tree, ("Gather",)):
        return 0  # (no dims left: a 0-d or all-size-1 output is one scalar)
    sizes = [out_dtype.itemsize] + [inputs[k].dtype.itemsize for k in vmap]
    v = 8 if max(sizes) <= 2 else 4
    if not _multiple(shape[-1], v):
        return 0
    last = len(shape) - 1
    return v if all(_access(view, last, v) for view in vmap.values()) else 0


def _vector_body(lang, shape, vmap, inputs, out_dtype, tree, names, itype, V, n) -> list:
    g, stride = gtid(lang, itype)
    body = [f"const {itype} nv = {ix.r(n, names)} / {V};",
            f"for ({itype} w = {g}; w < nv; w += {stride}) {{",
            f"  const {itype} i = w * {V};"]
    cl, cs = ix.coords(shape, "i", names, "c", itype)
    inner = list(cl) if vmap else []
    last = len(shape) - 1
    kinds = {}
    for k, view in vmap.items():
        inp = inputs[k]
        ct = compute_type(inp.dtype)
        kinds[k] = _access(view, last, V)
        if kinds[k] == "lanes":
            # each element at its own column (the row is the vector's: rows are whole vectors);
            # these loads still coalesce across the warp, and the store stays one vector
            cj = cs[:last] + [f"({cs[last]} + j)"]
            val, _ = view_read(lang, inp.dtype, f"b{k}", view, cj, names)
            inner += [f"{ct} x{k}[{V}];", "#pragma unroll", f"for (int j = 0; j < {V}; ++j) x{k}[j] = {val};"]
            continue
        addr = ix.address(view, cs, names)
        cond = ix.validity(view, cs, names)
        if kinds[k] == "vec":
            inner.append(f"{ct} x{k}[{V}];")
            load = f"lf_vld<{V}>(b{k} + ({addr}), x{k});"
            if cond is not None:
                inner.append(f"if ({cond}) {{ {load} }} else {{ for (int j = 0; j < {V}; ++j) x{k}[j] = {zero_of(ct)}; }}")
            else:
                inner.append(load)
        else:
            val = load_expr(lang, inp.dtype, f"b{k}[{addr}]")
            if cond is not None:
                val = f"(({cond}) ? {val} : {zero_of(ct)})"
            inner.append(f"const {ct} x{k} = {val};")
    ct_out = compute_type(out_dtype)
    inner.append(f"{ct_out} res[{V}];")
    inner.append("#pragma unroll")
    inner.append(f"for (int j = 0; j < {V}; ++j) {{")

    def leaf(k):
        return (f"x{k}" if kinds[k] == "scalar" else f"x{k}[j]"), compute_type(inputs[k].dtype)

    # a position (a join's test) is read at each element of the vector
    tr = TreeRenderer(lang, leaf, iota=lambda e: f"(int)({ix.r(e, {**names, 'z': '(i + j)'})})")
    val, vt = tr.render(tree)
    inner += ["  " + ln for ln in tr.lines]
    inner.append(f"  res[j] = {convert(lang, val, vt, ct_out)};")
    inner.append("}")
    inner.append(f"lf_vst<{V}>(out + i, res);")
    body += ["  " + ln for ln in inner]
    body.append("}")
    return body


# ---- scatter ----------------------------------------------------------------------------------------
SCATTER_CODES = {"set": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


def render_scatter(lang: Language, out_shape: Sequence, out_dtype: dt.DType, idx: KernelInput,
                   src: KernelInput, mode: str, dims_max: dict | None = None,
                   symbols: Sequence[str] = ()) -> KernelSource:
    """out.flat[idx[i]] (mode)= src[i] over the index array's elements; out must already hold a
    copy of dest (a separate copy kernel runs first). Out-of-range indices are dropped."""
    if mode not in SCATTER_CODES:
        raise ValueError(f"Scatter: unknown mode {mode!r}; expected one of {', '.join(SCATTER_CODES)}")
    names = ix.dim_names(symbols or _symbols_of(out_shape, [idx, src]))
    shape_i = idx.view.shape
    n_idx = ix.numel(shape_i)
    n_out = ix.numel(out_shape)
    itype = ix.index_type([n_idx, n_out, ix.view_extent(idx.view), ix.view_extent(src.view)], dims_max)
    views = [idx.view, src.view]
    shape, (vi, vs) = ix.coalesce(shape_i, views)
    g, stride = gtid(lang, itype)
    body = [f"const {itype} n = {ix.r(n_idx, names)};",
            f"const {itype} n_out = {ix.r(n_out, names)};",
            f"for ({itype} i = {g}; i < n; i += {stride}) {{"]
    cl, cs = ix.coords(shape, "i", names, "c", itype)
    inner = list(cl)
    ival = load_expr(lang, idx.dtype, f"b0[{ix.address(vi, cs, names)}]")
    cond = ix.validity(vi, cs, names)
    if cond is not None:
        ival = f"(({cond}) ? {ival} : 0)"
    ict = compute_type(idx.dtype)
    inner.append(f"const {itype} j = ({itype}){convert(lang, ival, ict, 'int')};")
    inner.append("if (j < 0 || j >= n_out) continue;")
    ct = compute_type(out_dtype)
    if src.inlined:
        from .tree import literal
        sval, sct = literal(lang, src.scalar, src.dtype.name)
    else:
        sval = load_expr(lang, src.dtype, f"b1[{ix.address(vs, cs, names)}]")
        sct = compute_type(src.dtype)
        c2 = ix.validity(vs, cs, names)
        if c2 is not None:
            sval = f"(({c2}) ? {sval} : {zero_of(sct)})"
    inner.append(f"const {ct} v = {convert(lang, sval, sct, ct)};")
    code = SCATTER_CODES[mode]
    if mode == "set":
        inner.append(f"out[j] = {store_expr(lang, out_dtype, 'v', ct)};")
    elif out_dtype in (dt.float32, dt.int32):
        inner.append(f"lf_atomic({code}, out + j, v);")
    else:
        inner.append(f"lf_atomic_narrow({code}, out + j, {convert(lang, 'v', ct, 'float')});")
    body += ["  " + ln for ln in inner]
    body.append("}")
    bufs = [("in0", "b0", idx.dtype, True)]
    if not src.inlined:
        bufs.append(("in1", "b1", src.dtype, True))
    bufs.append(("out", "out", out_dtype, False))
    return finish(lang, "scatter", body, bufs, BLOCK, n_idx, BLOCK, meta={"mode": mode})

"""The embedding-bag kernels of optimize/rules/specialize_models_bags.egg on CUDA: embedding_bag,
embedding_bag_multi and embedding_bag_multi_raw, one renderer for all three (the one-table bag is
the multi kernel with K = 1). The semantics are the NumPy backend's
(backends/numpy/model_kernels.py): out[b, f, d] = sum over l of table_f.flat[clip(rows_f[b*L + l]
* stride_f + d)], rows normalised as lnp.take does where the node carries a row count.
"""
from __future__ import annotations

from ...ir import dtypes as dt
from ...ir.expr import as_expr
from ..render import index as ix
from ..render.kernels import BLOCK, finish, gtid, zero_of
from ..render.lang import compute_type, store_expr
from ..render.tree import literal
from .modelkernels import _in_dtype, _linear, _load, _operand, _r, _unmasked
from .plan import lowerer
from .switches import switch_count, switch_on


# ---- embedding_bag and embedding_bag_multi -------------------------------------------------------
VEC = 4  # elements per thread of a bag row: one 16-byte load/store for float32
MAX_BATCHED = 16  # the most rows of a bag whose loads are issued together (registers: L * VEC)
BATCHED_SWITCH = "LUMINAL_CUDA_BAG_BATCHED"  # 0: each row's load waits for the one before
# blocks an SM of the bag's grid-stride loop: fewer, longer-lived blocks fill the tables' shared
# entries fewer times. Run FG (H100, DLRM num_cat 32, the bag alone): 80.2 us at the backend's
# default cap (32 an SM), 54.6 us at 8, 63.3 us at 16. $LUMINAL_CUDA_BAG_BLOCKS_PER_SM sets
# another (0: the backend's default), for sweeps.
BLOCKS_PER_SM = 8
BLOCKS_SWITCH = "LUMINAL_CUDA_BAG_BLOCKS_PER_SM"
_VEC_STORAGE = ("float32", "int32", "float16", "bfloat16")  # the prelude's lf_vld/lf_vst types


def _bag_params(node, fixed: int, tables: int, kind: str) -> tuple:
    """(the ``fixed`` leading params, the row count R_k per table: 0 = rows used as given,
    R > 0 = raw lnp.take indices the kernel normalises into R rows)."""
    p = tuple(node.attrs.get("params") or ())
    if len(p) not in (fixed, fixed + tables):
        raise ValueError(f"CUDA {kind} kernel (node %{node.id}): expected {fixed} params, or {fixed} "
                         f"and one row count per table ({tables}), got {p!r}")
    nrs = p[fixed:] or (0,) * tables
    if not all(isinstance(n, int) for n in nrs):
        raise ValueError(f"CUDA {kind} kernel (node %{node.id}): row counts {nrs!r} must be concrete")
    return p[:fixed], nrs


@lowerer("embedding_bag")
def lower_embedding_bag(pl, node):
    """out[b, d] = sum_l table.flat[clip(rows[b*L + l] * stride + d)] (the Gather clamp), rows
    normalised first when the node carries a row count R: the one-table case of the multi kernel."""
    (B, L, D), nrs = _bag_params(node, 3, 1, "embedding_bag")
    _render_bags(pl, node, "embedding_bag", B, 0, 1, L, D, nrs)


@lowerer("embedding_bag_multi")
def lower_embedding_bag_multi(pl, node):
    """K stacked bags in one launch (the rule in specialize_models.egg): out (B, P+K, D) with
    out[:, :P] = prefix and out[:, P+k, d] = sum_l table_k.flat[clip(rows_k[b*L + l] * stride_k
    + d)]. Every table, index array and (non-literal) stride is its own buffer, so its own
    pointer in the P table."""
    p = tuple(node.attrs.get("params") or ())
    K = p[2] if len(p) >= 5 else None
    if not isinstance(K, int):
        raise ValueError(f"CUDA embedding_bag_multi kernel (node %{node.id}): params {p!r} need a "
                         "concrete K (it counts the kernel's inputs)")
    (B, P, K, L, D), nrs = _bag_params(node, 5, K, "embedding_bag_multi")
    if not isinstance(P, int):
        raise ValueError(f"CUDA embedding_bag_multi kernel (node %{node.id}): P={P!r} must be "
                         "concrete (it counts the kernel's inputs)")
    first = 1 if P else 0
    if len(node.inputs) != first + 3 * K:
        raise ValueError(f"CUDA embedding_bag_multi kernel (node %{node.id}): P={P}, K={K} needs "
                         f"{first + 3 * K} inputs, got {len(node.inputs)}")
    _render_bags(pl, node, "embedding_bag_multi", B, P, K, L, D, nrs)


@lowerer("embedding_bag_multi_raw")
def lower_embedding_bag_multi_raw(pl, node):
    """embedding_bag_multi over raw lnp.take indices: per table (table, rows, stride, row
    count), the row count a 1-element input (a literal when lnp.take's scalar Constant, as the
    stride) that the kernel normalises rows_k with; params B P K L D."""
    p = tuple(node.attrs.get("params") or ())
    if len(p) != 5 or not all(isinstance(v, int) for v in p[1:3]):
        raise ValueError(f"CUDA embedding_bag_multi_raw kernel (node %{node.id}): params {p!r} must "
                         "be B P K L D with concrete P and K (they count the kernel's inputs)")
    B, P, K, L, D = p
    first = 1 if P else 0
    if len(node.inputs) != first + 4 * K:
        raise ValueError(f"CUDA embedding_bag_multi_raw kernel (node %{node.id}): P={P}, K={K} needs "
                         f"{first + 4 * K} inputs, got {len(node.inputs)}")
    _render_bags(pl, node, "embedding_bag_multi_raw", B, P, K, L, D, None)


class _Inputs:
    """The kernel's buffers in argument order (b0, b1, ... then out) and their buffer ids."""

    def __init__(self, pl, node):
        self.pl, self.node, self.bufs, self.ids = pl, node, [], []

    def add(self, k, view_ok=lambda v: True):
        """Input k as the next buffer: (its name, its view, its dtype)."""
        b_id, view = _operand(self.pl, self.node, k, view_ok)
        d = _in_dtype(self.pl, self.node, k)
        j = len(self.bufs)
        self.bufs.append((f"in{j}", f"b{j}", d, True))
        self.ids.append(b_id)
        return f"b{j}", view, d

    def output(self):
        self.bufs.append(("out", "out", self.node.dtype, False))
        self.ids.append(self.pl.node_buf[self.node.id])


def _render_bags(pl, node, kind: str, B, P: int, K: int, L, D, nrs):
    """out (B, P+K, D) row-major. Threads are numbered (f, b, d / V) with d fastest, so the 32
    threads of a warp share one slot f (the switch over tables is warp-uniform) and read
    consecutive 16-byte pieces of the same table rows; each thread sums V = 4 elements when D %
    4 == 0 (vector loads where the table's layout allows, else 4 scalar loads), otherwise one.
    The L row indices of a (b, f) are the same address for all D / V threads of the bag (one
    broadcast read per warp). ``nrs`` None: 4 inputs per table, the fourth its row count
    (embedding_bag_multi_raw)."""
    ct = compute_type(node.dtype)
    r = lambda e: _r(pl, e)  # noqa: E731
    V = VEC if isinstance(D, int) and D % VEC == 0 and node.dtype.name in _VEC_STORAGE else 1
    ins = _Inputs(pl, node)
    g, gstride = gtid(pl.lang, "long long")
    per = f"(long long)({r(D)})" if V == 1 else f"(long long)({D // V})"
    body = [f"const long long nb = {r(B)}, nf = {P + K}, nv = {per};",
            "const long long n = nf * nb * nv;",
            f"for (long long i = {g}; i < n; i += {gstride}) {{",
            "  const long long f = i / (nb * nv);",
            "  const long long rem = i - f * (nb * nv);",
            "  const long long b = rem / nv;",
            f"  const long long d = (rem - b * nv) * {V};",
            f"  {ct} acc[{V}];",
            "  #pragma unroll",
            f"  for (int q = 0; q < {V}; ++q) acc[q] = {zero_of(ct)};"]
    first = 1 if P else 0
    per = 4 if nrs is None else 3
    uniform = V > 1 and K > 1 and _uniform_tables(pl, node, first, per, K, ct)
    if uniform:  # the tables' pointers and sizes from shared memory: one code path for all
        prologue = _table_prologue(pl, node, ins, first, per, K, nrs)
    if P:
        body += ["  " + ln for ln in _prefix_lines(pl, ins, V, ct, P)]
    if uniform:
        body[0:0] = prologue
        body += [f"  {'else ' if P else ''}{{",
                 *["    " + ln for ln in _uniform_bag_lines(pl, node, first, per, L, V, ct, P,
                                                         normalised=nrs is None or any(nrs), D=D)],
                 "  }"]
        return _finish_bags(pl, node, ins, kind, body, B, P, K, D, V, ct)
    if P:
        body.append(f"  else switch ((int)f - {P}) {{")
    else:
        body.append("  switch ((int)f) {")
    for k in range(K):
        body.append(f"    case {k}: {{")
        n_rows = _row_count(pl, node, ins, first + 4 * k + 3) if nrs is None else nrs[k]
        body += ["      " + ln for ln in _bag_lines(pl, node, ins, first + per * k, L, V, ct, n_rows, D)]
        body += ["      break;", "    }"]
    body += ["    default: break;", "  }"]
    _finish_bags(pl, node, ins, kind, body, B, P, K, D, V, ct)


def _finish_bags(pl, node, ins, kind, body, B, P, K, D, V, ct):
    r = lambda e: _r(pl, e)  # noqa: E731
    body.append(f"  const long long o = (b * nf + f) * (long long)({r(D)}) + d;")
    if V > 1:
        body.append(f"  lf_vst<{V}>(out + o, acc);")
    else:
        body.append(f"  out[o] = {store_expr(pl.lang, node.dtype, 'acc[0]', ct)};")
    body.append("}")
    ins.output()
    work = ix.numel([B, P + K, D if V == 1 else D // V])
    per_sm = _blocks_per_sm()
    src = finish(pl.lang, kind, body, ins.bufs, BLOCK, work, BLOCK, grid_cap=pl.sm_count * per_sm,
                 meta={"model": True})
    pl.add_kernel(src, ins.ids, node.id, kind)


def _blocks_per_sm() -> int:
    return switch_count(BLOCKS_SWITCH, BLOCKS_PER_SM, "the blocks an SM of the bag's grid, such as 8 "
                        "(0: the backend's default)")


def _uniform_tables(pl, node, first: int, per: int, K: int, ct: str) -> bool:
    """Whether every table is read alike (unmasked, unit element step, the same literal row
    stride and dtype, 16-byte aligned rows) and every index array alike (unit step, the same
    dtype): then one code path serves all tables, their pointers taken from shared memory,
    instead of a switch with one case per table (a large kernel at 32 tables)."""
    seen = set()
    for k in range(K):
        t, rows, st = (first + per * k + j for j in range(3))
        tv, rv = node.inputs[t][1], node.inputs[rows][1]
        sk = pl.kernel_input(node, st)
        if not (_unmasked(tv) and _unmasked(rv) and sk.inlined and _linear(tv) and _linear(rv)):
            return False
        (t_off, t_step), (_, r_step) = _linear(tv), _linear(rv)
        stride = int(sk.scalar)
        tdt, rdt = _in_dtype(pl, node, t), _in_dtype(pl, node, rows)
        if _int(t_step) != 1 or _int(r_step) != 1 or stride % VEC or not _vector_ok(pl, tdt, ct, t_off):
            return False
        if pl.kernel_input(node, t).scalar is not None or pl.kernel_input(node, rows).scalar is not None:
            return False
        seen.add((stride, tdt.name, rdt.name))
    return len(seen) == 1


def _table_prologue(pl, node, ins, first: int, per: int, K: int, nrs) -> list:
    """Thread 0 writes each table's base pointer, index pointer, element count and row count
    (0: indices used as given) into shared memory, before the grid-stride loop."""
    r = lambda e: _r(pl, e)  # noqa: E731
    tdt = _in_dtype(pl, node, first)
    rdt = _in_dtype(pl, node, first + 1)
    lines = [f"__shared__ const {pl.lang.storage[tdt.name]}* lf_tab[{K}];",
             f"__shared__ const {pl.lang.storage[rdt.name]}* lf_idx[{K}];",
             f"__shared__ long long lf_tsize[{K}], lf_nrows[{K}];"]
    fills = []
    for k in range(K):
        t, rows = first + per * k, first + per * k + 1
        tvar, tv, _ = ins.add(t)
        rvar, rv, _ = ins.add(rows)
        n_rows = _row_count(pl, node, ins, first + 4 * k + 3) if nrs is None else nrs[k]
        fills += [f"  lf_tab[{k}] = {tvar} + ({r(_linear(tv)[0])});",
                  f"  lf_idx[{k}] = {rvar} + ({r(_linear(rv)[0])});",
                  f"  lf_tsize[{k}] = (long long)({r(ix.numel(tv.shape))});",
                  f"  lf_nrows[{k}] = {n_rows};"]
    return lines + ["if (threadIdx.x == 0) {"] + fills + ["}", "__syncthreads();"]


def _uniform_bag_lines(pl, node, first: int, per: int, L, V: int, ct: str, P: int,
                       normalised: bool, D) -> list:
    """One table's bag for (b, d .. d+V), the table chosen by f through the shared arrays: raw
    indices normalised as lnp.take does where a row count is known (``normalised``: some table
    has one), each row read as one vector when in the table, else element by element clamped
    (the Gather clamp)."""
    r = lambda e: _r(pl, e)  # noqa: E731
    tdt = _in_dtype(pl, node, first)
    rdt = _in_dtype(pl, node, first + 1)
    stride = int(pl.kernel_input(node, first + 2).scalar)
    row = _load(pl, rdt, "idx[(b * " + r(L) + " + l)]", "int")
    at = lambda j: _load(pl, tdt, f"tab[{j}]", ct)  # noqa: E731
    return [f"const int k = (int)f - {P};",
            f"const {pl.lang.storage[tdt.name]}* tab = lf_tab[k];",
            f"const {pl.lang.storage[rdt.name]}* idx = lf_idx[k];",
            "const long long tsize = lf_tsize[k];",
            *_row_loop(row, "lf_nrows[k]", f"{stride}LL", at, "tab", r(L), L, V, ct,
                       batched=normalised and _batchable(D, stride))]

def _int(e):
    """A concrete int, or None for a symbolic Expr."""
    if isinstance(e, int):
        return e
    c = as_expr(e)
    return c.args[0] if c.op == "const" else None


def _vector_ok(pl, d: dt.DType, ct: str, *aligned) -> bool:
    """Whether V consecutive elements of dtype ``d`` at an offset made of ``aligned`` (ints or
    Exprs, all multiples of V) are one aligned vector load returning ``ct``."""
    return (d.name in _VEC_STORAGE and compute_type(d) == ct
            and all(_int(a) is not None and _int(a) % VEC == 0 for a in aligned))


def _prefix_lines(pl, ins, V: int, ct: str, P: int) -> list:
    """``if (f < P) acc = prefix[b, f, d:d+V]`` (an aligned vector load when the view allows)."""
    r = lambda e: _r(pl, e)  # noqa: E731
    var, pv, pdt = ins.add(0, lambda v: len(v.shape) == 3)
    sb, sf, sd = pv.strides
    base = (f"{r(pv.offset)} + b * (long long)({r(sb)}) + f * (long long)({r(sf)})"
            f" + d * (long long)({r(sd)})")
    if V > 1 and _int(sd) == 1 and _vector_ok(pl, pdt, ct, pv.offset, sb, sf):
        return [f"if (f < {P}) lf_vld<{V}>({var} + ({base}), acc);"]
    at = f"{var}[{base} + q * (long long)({r(sd)})]"
    return [f"if (f < {P}) {{",
            "  #pragma unroll",
            f"  for (int q = 0; q < {V}; ++q) acc[q] = {_load(pl, pdt, at, ct)};",
            "}"]


def _row_count(pl, node, ins, k: int):
    """Input k, a table's row count: its int when lnp.take's scalar Constant (inlined), else the
    C expression loading it (the kernel checks it is > 0 at run time)."""
    ki = pl.kernel_input(node, k)
    if ki.inlined:
        return int(ki.scalar)
    var, view, d = ins.add(k)
    return f"(long long)({_load(pl, d, f'{var}[{_r(pl, view.offset)}]', 'int')})"


def _bag_lines(pl, node, ins, k: int, L, V: int, ct: str, n_rows, D) -> list:
    """Lines adding one table's bag for (b, d .. d+V) into ``acc``: inputs k (the table), k+1
    (the row indices, normalised as lnp.take does when ``n_rows`` > 0) and k+2 (the row stride: a
    literal when lnp.take's scalar Constant, else a buffer), each flat index clamped into the
    table as the Gather primitive clamps."""
    r = lambda e: _r(pl, e)  # noqa: E731
    linear = lambda v: _linear(v) is not None  # noqa: E731
    tvar, tv, tdt = ins.add(k, linear)
    t_off, t_step = _linear(tv)
    rvar, rv, rdt = ins.add(k + 1, linear)
    r_off, r_step = _linear(rv)
    sk = pl.kernel_input(node, k + 2)
    if sk.inlined:
        stride_val = int(sk.scalar)
        stride = literal(pl.lang, sk.scalar, "int32")[0]
    else:
        stride_val = None
        svar, sv, sdt = ins.add(k + 2)
        stride = _load(pl, sdt, f"{svar}[{r(sv.offset)}]", "int")
    row = _load(pl, rdt, f"{rvar}[{r(r_off)} + (b * {r(L)} + l) * (long long)({r(r_step)})]", "int")
    at = lambda j: _load(pl, tdt, f"{tvar}[{r(t_off)} + ({j}) * (long long)({r(t_step)})]", ct)  # noqa: E731
    vec = (V > 1 and _int(t_step) == 1 and stride_val is not None and stride_val % VEC == 0
           and _vector_ok(pl, tdt, ct, t_off))
    return [f"const long long tsize = (long long)({r(ix.numel(tv.shape))}), "
            f"rstride = (long long)({stride});",
            "if (tsize > 0) {",
            *["  " + ln for ln in _row_loop(row, n_rows, "rstride", at, f"{tvar} + ({r(t_off)})" if vec else None,
                                            r(L), L, V, ct, batched=_batchable(D, stride_val))],
            "}"]


def _batchable(D, stride) -> bool:
    """Whether a bag row's V elements at d (d + V <= D) stay inside their row: D <= the row
    stride (both concrete), so a row index clamped into the table reads inside it."""
    return isinstance(D, int) and isinstance(stride, int) and 0 < D <= stride


def _row_loop(row: str, n_rows, stride: str, at, vec_base, L_text: str, L, V: int, ct: str,
              batched: bool = False) -> list:
    """The L rows of one bag added into ``acc`` (``tsize`` declared by the caller): each row index
    ``row`` (C, of ``l``) normalised as lnp.take does with ``n_rows`` (an int: 0 = as given; a C
    expression: checked > 0 at run time), then its V elements at ``row * stride + d`` read as one
    vector from ``vec_base`` when inside the table, else one by one through ``at(j)`` with the
    Gather primitive's clamp. ``batched`` (the row's elements stay inside it): where the rows
    are normalised and the table holds all of them, the L vector loads are issued together before
    any is added (a random 256-byte row each: one after another, they left DLRM's 32-table bag
    waiting on memory latency), then added in the same order."""
    loop = _row_loop_each(row, n_rows, stride, at, vec_base, L_text, L, V, ct)
    if not (batched and vec_base is not None and isinstance(L, int) and 0 < L <= MAX_BATCHED
            and n_rows != 0 and switch_on(BATCHED_SWITCH, True, "issue a bag's row loads together")):
        return loop
    nr = n_rows if isinstance(n_rows, str) else f"{n_rows}LL"
    return [f"if ({nr} > 0 && ({nr}) * {stride} <= tsize) {{",
            f"  const long long nr = {nr};",
            f"  long long js[{L}];",
            "  #pragma unroll",
            f"  for (int l = 0; l < {L}; ++l) {{",
            f"    long long row = (long long)({row});",
            "    row += row < 0 ? nr : 0LL;",
            "    js[l] = (row < 0 ? 0LL : (row > nr - 1 ? nr - 1 : row)) * " + stride + " + d;",
            "  }",
            f"  {ct} xs[{L}][{V}];",
            "  #pragma unroll",
            f"  for (int l = 0; l < {L}; ++l) lf_vld<{V}>({vec_base} + js[l], xs[l]);",
            "  #pragma unroll",
            f"  for (int l = 0; l < {L}; ++l) {{",
            "    #pragma unroll",
            f"    for (int q = 0; q < {V}; ++q) acc[q] = ({ct})(acc[q] + xs[l][q]);",
            "  }",
            "} else {", *["  " + ln for ln in loop], "}"]


def _row_loop_each(row: str, n_rows, stride: str, at, vec_base, L_text: str, L, V: int, ct: str) -> list:
    """_row_loop's general form: one row at a time, each checked against the table's end."""
    lines = (["#pragma unroll"] if isinstance(L, int) and L <= 16 else []) + [
        f"for (int l = 0; l < {L_text}; ++l) {{",
        f"  long long row = (long long)({row});"]
    if isinstance(n_rows, str):
        lines += [f"  const long long nr = {n_rows};",
                  "  if (nr > 0) {",
                  "    row += row < 0 ? nr : 0LL;",
                  "    row = row < 0 ? 0LL : (row > nr - 1 ? nr - 1 : row);",
                  "  }"]
    elif n_rows > 0:  # negatives count from the end, then clamp
        lines += [f"  row += row < 0 ? {n_rows}LL : 0LL;",
                  f"  row = row < 0 ? 0LL : (row > {n_rows - 1}LL ? {n_rows - 1}LL : row);"]
    lines.append(f"  const long long j = row * {stride} + d;")
    clamped = ["    #pragma unroll",
               f"    for (int q = 0; q < {V}; ++q) {{",
               "      long long jq = j + q;",
               "      jq = jq < 0 ? 0 : (jq >= tsize ? tsize - 1 : jq);",
               f"      acc[q] = ({ct})(acc[q] + {at('jq')});",
               "    }"]
    if vec_base is not None:
        lines += [f"  if (j >= 0 && j + {V} <= tsize) {{",
                  f"    {ct} x[{V}];",
                  f"    lf_vld<{V}>({vec_base} + j, x);",
                  "    #pragma unroll",
                  f"    for (int q = 0; q < {V}; ++q) acc[q] = ({ct})(acc[q] + x[q]);",
                  "  } else {", *clamped, "  }"]
    else:
        lines += ["  {", *clamped, "  }"]
    return lines + ["}"]

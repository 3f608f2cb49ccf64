"""Kernels the front end names for a subgraph it traced (Graph.composites): the subgraph stays
the definition, and a backend that lists the kernel among its kernel kinds may run the kernel in
its place. With ``only`` (sorts; scans along a dynamic or long axis) the optimizer offers nothing else for
that tensor there (optimize/extract.py): sorting by ranks compares every pair of a row (n^2 work
and, on a backend that materialises the comparisons, n^2 memory). Otherwise the kernel is one
more option the search times (scans along a short static axis, arctan2).

name            inputs          params          value
sort_rows       x (R, N)        R N DESC        x sorted along its last axis: ascending, stable,
                                                NaN after +inf (NumPy's order); DESC 1: JAX's
                                                descending order (the ascending one reversed, so
                                                NaN first), ties still in index order
argsort_rows    x (R, N)        R N DESC        the int32 positions of that order
top_k_rows      x (R, N)        R N K           the first K of argsort_rows(x) with DESC 1 (the
                                                positions of the K largest, jax.lax.top_k's)
scan_rows       x (R, N)        R N OP          the inclusive scan along the last axis, OP 0 a
                                                sum (cumsum), 1 a product (cumprod), 2 a
                                                maximum (cummax), 3 a minimum (cummin; NaN
                                                from a NaN on); x float32
                                                or int32 (int32 wraps), the result x's dtype
arctan2         y, x (the       -               atan2(y, x) elementwise, float32 / float64 (C's
                result's shape)                 atan2: np.arctan2 on NumPy, mx.arctan2 on MLX,
                                                atan2f on CUDA; half operands computed in float32)
arcsin, arccos  x               -               asin(x), acos(x) elementwise, as arctan2
Bool rows sort as int32 0 / 1; +0.0 and -0.0 are equal keys (ties). A scan's float rounding is
the kernel's own order of additions (NumPy's is sequential; the front end's pairwise).
"""
from __future__ import annotations

COMPOSITES = {
    "sort_rows": "x sorted along its last axis (stable; NaN last; DESC: JAX's descending order)",
    "argsort_rows": "the int32 positions that sort x along its last axis (as sort_rows)",
    "top_k_rows": "the int32 positions of the K largest along the last axis (argsort_rows DESC's first K)",
    "scan_rows": "the inclusive sum (OP 0), product (OP 1), maximum (OP 2) or minimum (OP 3) of x along its last axis",
    "arctan2": "atan2(y, x), elementwise",
    "arcsin": "asin(x), elementwise",
    "arccos": "acos(x), elementwise",
}

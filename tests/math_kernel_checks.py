"""Checks shared by the tests of the arctan2 / arcsin / arccos kernels on MLX and CUDA
(tests/test_mlx_math_kernels.py, tests/test_cuda_math_kernels.py): a backend's own atan2 is
measured in ulps against the float64 value rounded to float32 (NumPy's float32 loops are
themselves up to 3 ulp off it), and at C99's special cases it must give NumPy's bits."""
from __future__ import annotations

import numpy as np
from test_numpy_arctan2_kernel import VALUES, _pairs  # noqa: F401  (the edge values, every pairing)

F32 = np.float32
REFERENCES = {"arctan2": np.arctan2, "arcsin": np.arcsin, "arccos": np.arccos}
# x values for arcsin / arccos: a sweep, the edges of arctan2's tests, |x| just inside and past 1
UNIT = np.concatenate([np.sin(np.linspace(-4, 4, 301, dtype=F32)), VALUES,
                       F32([1.0, -1.0, 0.99999994, -0.99999994, 1.0000001, -1.0000001, 0.5, -0.5])])


def kernel_names(llir) -> list:
    """The names of an LLIR graph's CustomOp kernels, in order."""
    return [n.attrs.get("name") for n in llir.live_nodes() if n.op == "CustomOp"]


def ulps(got, want) -> np.ndarray:
    """The float32 distance between got and want in units in the last place (+0 and -0 the same
    point; subnormals one unit apart each)."""
    def ordered(a):
        i = np.asarray(a, F32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    return np.abs(ordered(got) - ordered(want))


def truth(name: str, *args) -> np.ndarray:
    """The function in float64, rounded to float32 once."""
    with np.errstate(all="ignore"):
        return REFERENCES[name](*(np.asarray(a, np.float64) for a in args)).astype(F32)


def special(name: str, *args) -> np.ndarray:
    """Where C99 fixes the result (Annex F): a zero, infinite or NaN operand of atan2; arcsin /
    arccos of a zero, +-1, |x| > 1 or NaN."""
    if name == "arctan2":
        y, x = np.broadcast_arrays(*args)
        return (y == 0) | (x == 0) | np.isinf(y) | np.isinf(x) | np.isnan(y) | np.isnan(x)
    (x,) = args
    return (x == 0) | (np.abs(x) >= 1) | np.isnan(x)


def check(got, name: str, *args, ulp: int = 2, numpy_ulp: int = 4) -> None:
    """``got`` is ``name(*args)`` (float32 operands): NaN where NumPy gives NaN, within ``ulp``
    of the correctly rounded value and ``numpy_ulp`` of NumPy's, zeros of NumPy's sign, and
    NumPy's bits at the special cases."""
    got = np.asarray(got)
    assert got.dtype == F32, got.dtype
    with np.errstate(all="ignore"):
        want = REFERENCES[name](*args).astype(F32)
    got, want = np.broadcast_arrays(got, want)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{name}: NaN at {np.argwhere(np.isnan(got) != nan)[:5].tolist()}"
    t = np.broadcast_to(truth(name, *args), want.shape)
    off = ulps(got, t)[~nan]
    assert off.max(initial=0) <= ulp, f"{name}: {off.max()} ulp from the correctly rounded value"
    assert ulps(got, want)[~nan].max(initial=0) <= numpy_ulp, f"{name}: off NumPy's value"
    zero = want == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), f"{name}: a zero's sign"
    fixed = np.broadcast_to(special(name, *args), want.shape) & ~nan
    bad = np.argwhere(fixed & (got.view(np.int32) != want.view(np.int32)))
    if len(bad):
        k = tuple(bad[0])
        ops = [np.broadcast_to(a, want.shape)[k] for a in args]
        raise AssertionError(f"{name}{tuple(ops)}: {got[k]!r}, NumPy (C99) {want[k]!r}")


__all__ = ["F32", "REFERENCES", "UNIT", "VALUES", "check", "special", "truth", "ulps", "_pairs"]

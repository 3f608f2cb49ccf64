"""The dtypes of the HLIR, NumPy equivalents, promotion and the boundary narrowing rule.

Narrowing rule (applied to every array that enters a jitted function, on every backend):
  * float64 -> float32; int64/uint32/uint64 -> int32, int8/int16/uint8/uint16 -> int32.
  * Integers are converted by value, never reinterpreted: a value outside the int32 range raises
    ``OverflowError`` naming the argument, instead of wrapping or reading half-words.
Python scalars are weakly typed as in JAX: ``x * 2`` keeps ``x``'s dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

try:  # bfloat16 storage for NumPy comes from ml_dtypes (a dependency of JAX and friends)
    import ml_dtypes as _ml

    _BF16_NP = np.dtype(_ml.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a declared dependency
    _BF16_NP = None


@dataclass(frozen=True)
class DType:
    name: str
    itemsize: int
    kind: str  # "f" float, "i" signed int, "b" bool

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def np(self) -> np.dtype:
        return to_numpy(self)

    def __repr__(self):
        return self.name

    __str__ = __repr__


float32 = DType("float32", 4, "f")
float16 = DType("float16", 2, "f")
bfloat16 = DType("bfloat16", 2, "f")
int32 = DType("int32", 4, "i")
bool_ = DType("bool", 1, "b")

ALL = (float32, float16, bfloat16, int32, bool_)
BY_NAME = {d.name: d for d in ALL}
BY_NAME["bool_"] = bool_

_TO_NP = {
    float32: np.dtype(np.float32),
    float16: np.dtype(np.float16),
    int32: np.dtype(np.int32),
    bool_: np.dtype(np.bool_),
}
if _BF16_NP is not None:
    _TO_NP[bfloat16] = _BF16_NP


def to_numpy(d: DType) -> np.dtype:
    try:
        return _TO_NP[d]
    except KeyError:
        raise TypeError(f"dtype {d} has no NumPy equivalent here (install ml_dtypes)") from None


# NumPy dtypes accepted at the boundary, and what they become.
_NARROW = {
    np.dtype(np.float64): float32,
    np.dtype(np.float32): float32,
    np.dtype(np.float16): float16,
    np.dtype(np.int64): int32,
    np.dtype(np.int32): int32,
    np.dtype(np.int16): int32,
    np.dtype(np.int8): int32,
    np.dtype(np.uint8): int32,
    np.dtype(np.uint16): int32,
    np.dtype(np.uint32): int32,
    np.dtype(np.uint64): int32,
    np.dtype(np.bool_): bool_,
}
if _BF16_NP is not None:
    _NARROW[_BF16_NP] = bfloat16

_I32 = np.iinfo(np.int32)


def canonicalize(dtype) -> DType:
    """Any dtype spelling (DType, name, NumPy dtype, Python type) -> the HLIR dtype it maps to."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str) and dtype in BY_NAME:
        return BY_NAME[dtype]
    if dtype is float:
        return float32
    if dtype is int:
        return int32
    if dtype is bool:
        return bool_
    try:
        npd = np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"unsupported dtype {dtype!r}: luminal_fn supports float32, float16, bfloat16, int32 "
            "and bool (float64/int64 are narrowed to 32 bits)"
        ) from None
    if npd in _NARROW:
        return _NARROW[npd]
    raise TypeError(
        f"unsupported dtype {npd}: luminal_fn supports float32, float16, bfloat16, int32 and bool; "
        "convert the array first (for example x.astype(np.float32))"
    )


def narrow_array(x: np.ndarray, what: str = "argument") -> np.ndarray:
    """Apply the boundary narrowing rule to a NumPy array (returns x itself when no change)."""
    d = canonicalize(x.dtype)
    target = to_numpy(d)
    if x.dtype == target:
        return x
    if d is int32 and x.size:
        lo, hi = x.min(), x.max()
        if lo < _I32.min or hi > _I32.max:
            raise OverflowError(
                f"{what} has {x.dtype} values in [{lo}, {hi}], outside the int32 range that "
                "luminal_fn computes in; values are converted, never truncated: rescale or split them"
            )
    return x.astype(target)


# ---- promotion --------------------------------------------------------------------------------
_RANK = {bool_: 0, int32: 1, float16: 2, bfloat16: 2, float32: 3}


def promote(a: DType, b: DType) -> DType:
    """Result dtype of a binary op between two arrays (JAX-like lattice over our dtypes)."""
    if a is b:
        return a
    if {a, b} == {float16, bfloat16}:
        return float32
    return a if _RANK[a] >= _RANK[b] else b


def promote_weak(strong: DType, scalar) -> DType:
    """Dtype of ``array op python_scalar``: the scalar adopts the array's dtype unless its kind
    is higher (an int array times 0.5 becomes float32)."""
    if isinstance(scalar, bool):
        return strong
    if isinstance(scalar, int):
        return int32 if strong is bool_ else strong
    if isinstance(scalar, float):
        return strong if strong.is_float else float32
    raise TypeError(f"unsupported scalar {scalar!r}")


def scalar_dtype(v) -> DType:
    if isinstance(v, (bool, np.bool_)):
        return bool_
    if isinstance(v, (int, np.integer)):
        return int32
    if isinstance(v, (float, np.floating)):
        return float32
    raise TypeError(f"unsupported scalar {v!r} of type {type(v).__name__}")

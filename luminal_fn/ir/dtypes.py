"""The dtypes of the HLIR, NumPy equivalents, promotion and the boundary narrowing rule.

Narrowing rule (applied to every array that enters a jitted function, on every backend):
  * float64 -> float32; int64/uint32/uint64 -> int32, int8/int16/uint8/uint16 -> int32.
  * Values are converted, never reinterpreted: an integer outside the int32 range, or a finite
    float64 beyond the float32 range (it would become inf), raises ``OverflowError`` naming the
    argument instead of wrapping, saturating or reading half-words. float64 -> float32 rounding
    of in-range values is the only change the rule makes to a value.
  * Non-native byte order is converted to native; complex, string and object arrays are not
    supported (``DTypeError``).
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


class DTypeError(TypeError):
    """An unsupported dtype. The front end replaces ``unsupported_error`` below with its
    ``luminal_fn.DTypeError`` (a LuminalError), so this layer need not import the front end."""


unsupported_error: type = DTypeError


# eq=False: the five dtypes are singletons, compared and hashed by identity. That keeps them
# cheap as cache keys on the dispatch path (a field-wise dataclass hash costs ~0.3 us each).
@dataclass(frozen=True, eq=False)
class DType:
    name: str
    itemsize: int
    kind: str  # "f" float, "i" signed int, "b" bool

    def __reduce__(self):  # pickling and deepcopy give back the singleton
        return (_by_name, (self.name,))

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

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype: ``np.dtype(lf.float32)`` and ``np.issubdtype(x.dtype, ...)`` read it."""
        return to_numpy(self)

    @property
    def type(self):
        """The NumPy scalar type (``np.float32``, ml_dtypes' ``bfloat16``), as ``np.dtype.type``."""
        return to_numpy(self).type

    # Equal to the NumPy dtype it stands for, as a NumPy dtype is to its spellings (so
    # ``x.dtype == np.float32`` and ``x.dtype == "float32"`` hold, as with JAX's dtypes); the hash
    # is the NumPy dtype's, so the two are interchangeable as dict keys.
    def __eq__(self, other):
        if other is self:
            return True
        if type(other) is DType or other is None:
            return False
        try:
            return to_numpy(self) == np.dtype(other)
        except (TypeError, ValueError, DTypeError):
            return NotImplemented

    def __hash__(self):
        return _HASH[self.name]

    def __repr__(self):
        return self.name

    __str__ = __repr__


float32 = DType("float32", 4, "f")
float16 = DType("float16", 2, "f")
bfloat16 = DType("bfloat16", 2, "f")
int32 = DType("int32", 4, "i")
bool_ = DType("bool", 1, "b")

ALL = (float32, float16, bfloat16, int32, bool_)
HALF = (float16, bfloat16)  # stored in 16 bits, computed in float32
BY_NAME = {d.name: d for d in ALL}
_HASH = {d.name: hash(_BF16_NP if d is bfloat16 else np.dtype(d.name)) for d in ALL}
BY_NAME["bool_"] = bool_


def _by_name(name: str) -> DType:
    return BY_NAME[name]

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
        raise unsupported_error(f"dtype {d} has no NumPy equivalent here (install ml_dtypes)") from None


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
_F32_MAX = float(np.finfo(np.float32).max)


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
        raise unsupported_error(
            f"unsupported dtype {dtype!r}: luminal_fn supports float32, float16, bfloat16, int32 "
            "and bool (float64/int64 are narrowed to 32 bits)"
        ) from None
    d = _NARROW.get(npd)
    if d is None and npd.byteorder not in "=|":  # big-endian data converts like native data
        d = _NARROW.get(npd.newbyteorder("="))
    if d is not None:
        return d
    raise unsupported_error(
        f"unsupported dtype {npd}: luminal_fn supports float32, float16, bfloat16, int32 and bool "
        "(float64/int64 are narrowed to 32 bits); convert the array first (for example "
        "x.real.astype(np.float32) for complex data)"
    )


def narrow_array(x: np.ndarray, what: str = "argument") -> np.ndarray:
    """Apply the boundary narrowing rule to a NumPy array (returns x itself when no change).
    ``what`` names the value in errors (for example "f: argument 'x'")."""
    try:
        d = canonicalize(x.dtype)
    except DTypeError as e:
        raise unsupported_error(f"{what}: {e}") from None
    target = to_numpy(d)
    if x.dtype == target:
        return x
    if x.size and d is int32 and x.dtype.kind in "iu" and x.dtype.itemsize >= 4:
        lo, hi = x.min(), x.max()
        if lo < _I32.min or hi > _I32.max:
            raise OverflowError(
                f"{what} has {x.dtype} values in [{lo}, {hi}], outside the int32 range that "
                "luminal_fn computes in; values are converted, never wrapped: rescale, offset or "
                "split them"
            )
    if x.size and d is float32 and x.dtype.itemsize > 4:
        with np.errstate(invalid="ignore"):
            big = np.abs(x[np.isfinite(x)]).max(initial=0.0)
        if big > _F32_MAX:
            raise OverflowError(
                f"{what} has {x.dtype} values up to {big:.6g}, beyond the float32 range that "
                "luminal_fn computes in (they would become inf); rescale them"
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
    raise unsupported_error(f"unsupported scalar {scalar!r}")


def scalar_dtype(v) -> DType:
    if isinstance(v, (bool, np.bool_)):
        return bool_
    if isinstance(v, (int, np.integer)):
        return int32
    if isinstance(v, (float, np.floating)):
        return float32
    raise unsupported_error(f"unsupported scalar {v!r} of type {type(v).__name__}")

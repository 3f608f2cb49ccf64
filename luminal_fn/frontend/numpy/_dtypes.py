"""Dtype queries (finfo, iinfo, issubdtype, isdtype, can_cast, promote_types) over luminal_fn's
dtypes and any NumPy spelling of them. bfloat16 counts as a real floating type, as in JAX
(ml_dtypes' scalar type is not a NumPy ``floating`` subclass, so NumPy's own answers differ)."""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ..errors import DTypeError

__all__ = ["finfo", "iinfo", "issubdtype", "isdtype", "can_cast", "promote_types"]

# NumPy's abstract scalar types a bfloat16 belongs to
_BF16_ABSTRACT = (np.floating, np.inexact, np.number, np.generic)


def _np_dtype(x, fn: str) -> np.dtype:
    """A NumPy dtype for a dtype spelling, an array or a traced value (its dtype)."""
    if isinstance(x, dt.DType):
        return dt.to_numpy(x)
    d = getattr(x, "dtype", None)
    if d is not None and not isinstance(x, type):
        return dt.to_numpy(d) if isinstance(d, dt.DType) else np.dtype(d)
    try:
        return np.dtype(x)
    except TypeError:
        raise DTypeError(f"{fn}: {x!r} is not a dtype, an array or a dtype name") from None


def _is_bf16(d: np.dtype) -> bool:
    return d.name == "bfloat16"


def finfo(dtype):
    """Machine limits of a float dtype (``lnp.finfo(x.dtype).min`` for an attention mask)."""
    d = _np_dtype(dtype, "finfo")
    if _is_bf16(d):
        import ml_dtypes

        return ml_dtypes.finfo(d)
    if d.kind != "f":
        raise DTypeError(f"finfo: {d} is not a floating dtype (use iinfo for integers)")
    return np.finfo(d)


def iinfo(dtype):
    """Machine limits of an integer dtype."""
    d = _np_dtype(dtype, "iinfo")
    if d.kind not in "iu":
        raise DTypeError(f"iinfo: {d} is not an integer dtype (use finfo for floats)")
    return np.iinfo(d)


def issubdtype(arg1, arg2) -> bool:
    """NumPy's issubdtype; bfloat16 is a ``floating`` (and ``inexact``, ``number``) type."""
    d = _np_dtype(arg1, "issubdtype")
    if isinstance(arg2, type) and issubclass(arg2, np.generic) and _is_bf16(d):
        return arg2 in _BF16_ABSTRACT or arg2 is d.type
    if _is_bf16(d):
        return _np_dtype(arg2, "issubdtype") == d
    return bool(np.issubdtype(d, arg2 if isinstance(arg2, type) else _np_dtype(arg2, "issubdtype")))


_KINDS = {"bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
          "real floating": "f", "complex floating": "c", "numeric": "iufc"}


def isdtype(dtype, kind) -> bool:
    """The array API's isdtype: ``kind`` a dtype, one of the kind names ("bool", "signed
    integer", "unsigned integer", "integral", "real floating", "complex floating", "numeric")
    or a tuple of these."""
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    d = _np_dtype(dtype, "isdtype")
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: kind {kind!r} is not one of {sorted(_KINDS)}")
        return (d.kind if not _is_bf16(d) else "f") in _KINDS[kind]
    return d == _np_dtype(kind, "isdtype")


def promote_types(type1, type2) -> dt.DType:
    """The dtype a binary op between arrays of these dtypes gives (luminal_fn's lattice, JAX's:
    int32 with float16 is float16, float16 with bfloat16 is float32)."""
    return dt.promote(_ours(type1, "promote_types"), _ours(type2, "promote_types"))


def _ours(x, fn: str) -> dt.DType:
    """luminal_fn's dtype for what _np_dtype reads (float64 narrowed to float32, as everywhere)."""
    npd = _np_dtype(x, fn)
    try:
        return dt.canonicalize(npd)
    except DTypeError as e:
        raise DTypeError(f"{fn}: {e}") from None


_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def can_cast(from_, to, casting="safe") -> bool:
    """Whether a cast keeps values under ``casting`` (NumPy's rules over luminal_fn's lattice:
    "safe" when promotion gives ``to``, so int32 -> float16 is safe here as in JAX)."""
    if casting not in _CASTINGS:
        raise ValueError(f"can_cast: casting must be one of {_CASTINGS}, got {casting!r}")
    a, b = _ours(from_, "can_cast"), _ours(to, "can_cast")
    if casting == "unsafe":
        return True
    if casting in ("no", "equiv"):
        return a is b
    if casting == "same_kind":
        return "bif".index(a.kind) <= "bif".index(b.kind)
    return dt.promote(a, b) is b

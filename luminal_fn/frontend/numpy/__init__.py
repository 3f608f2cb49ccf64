"""The NumPy-like namespace, ``luminal_fn.numpy``: NumPy names and semantics over traced arrays.

Every function decomposes into HLIR primitives. Called outside a jitted function with concrete
arrays, a function runs eagerly on the NumPy backend and returns a ``luminal_fn.Array``.
"""
from __future__ import annotations

import types as _types

import numpy as _np

from ...ir import dtypes as _dt
from .. import tracer as _tracer
from . import (_array_api, _binning, _construct, _creation, _dtypes, _editing, _floating, _index, _integer, _linalg, _linalg_solve, _math,
               _numeric, _polynomial, _predicates, _quantile, _reduce, _shape, _sorting)
from ._eager import eager as _eager

float32 = _dt.float32
float16 = _dt.float16
bfloat16 = _dt.bfloat16
int32 = _dt.int32
bool_ = _dt.bool_
# NumPy's abstract scalar types, for issubdtype(x.dtype, lnp.floating)
generic, number, inexact, floating = _np.generic, _np.number, _np.inexact, _np.floating
integer, signedinteger, unsignedinteger = _np.integer, _np.signedinteger, _np.unsignedinteger
pi = 3.141592653589793
e = 2.718281828459045
inf = float("inf")
nan = float("nan")
newaxis = None

_MATH = [
    "add", "subtract", "multiply", "divide", "true_divide", "negative", "positive",
    "reciprocal", "mod", "remainder", "fmod", "power", "float_power", "square", "sqrt", "rsqrt",
    "cbrt", "absolute", "abs", "fabs", "sign", "copysign", "signbit", "maximum", "minimum", "fmax",
    "fmin", "clip", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "logaddexp",
    "logaddexp2", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh",
    "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg", "radians", "degrees", "hypot",
    "sinc", "floor", "ceil", "trunc", "fix", "rint", "around", "less", "less_equal", "greater",
    "greater_equal", "equal", "not_equal", "logical_and", "logical_or", "logical_xor",
    "logical_not", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "nan_to_num", "where",
    "bitwise_not", "invert", "conj", "real",
]
_SHAPE = [
    "shape", "ndim", "size", "reshape", "ravel", "transpose", "permute_dims", "swapaxes", "moveaxis",
    "rollaxis", "expand_dims", "squeeze", "broadcast_to", "broadcast_arrays", "atleast_1d",
    "atleast_2d", "atleast_3d", "concatenate", "concat", "stack", "vstack", "hstack", "dstack",
    "column_stack", "split", "array_split", "hsplit", "vsplit", "repeat", "tile", "pad", "flip",
    "fliplr", "flipud", "roll", "rot90", "tril", "triu", "copy", "astype", "result_type",
]
_REDUCE = [
    "sum", "max", "amax", "min", "amin", "ptp", "mean", "var", "std", "average", "any", "all",
    "count_nonzero", "argmax", "argmin", "cumsum", "cumprod", "logsumexp", "nansum", "nanmean",
    "nanmax", "nanmin", "nanprod", "nancumsum", "nancumprod", "nanvar", "nanstd", "nanargmax",
    "nanargmin", "trace",
]
_LINALG = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "diagonal", "kron", "vecdot",
           "matvec", "vecmat"]
_CREATION = [
    "full", "zeros", "ones", "empty", "zeros_like", "ones_like", "empty_like", "full_like",
    "arange", "linspace", "logspace", "eye", "identity", "tri", "array", "asarray", "meshgrid",
    "indices", "tril_indices", "triu_indices", "diag", "diagflat",
]
_INDEX = ["take", "take_along_axis", "put_along_axis", "compress"]
_SORTING = ["sort", "argsort", "top_k", "partition", "argpartition", "searchsorted", "unique",
            "nonzero", "argwhere", "flatnonzero"]
_INTEGER = ["floor_divide", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "gcd",
            "lcm", "bitwise_count"]
_QUANTILE = ["quantile", "nanquantile", "percentile", "nanpercentile", "median", "nanmedian"]

_g = globals()
for _mod, _names in ((_math, _MATH), (_shape, _SHAPE), (_reduce, _REDUCE), (_linalg, _LINALG),
                     (_creation, _CREATION), (_index, _INDEX), (_sorting, _SORTING),
                     (_quantile, _QUANTILE), (_integer, _INTEGER), (_numeric, _numeric.__all__),
                     (_binning, _binning.__all__), (_predicates, _predicates.__all__),
                     (_editing, _editing.__all__), (_floating, _floating.__all__),
                     (_array_api, _array_api.__all__), (_polynomial, _polynomial.__all__),
                     (_construct, _construct.__all__)):
    for _n in _names:
        _g[_n] = _eager(getattr(_mod, _n), _n)

prod = _eager(_reduce.prod_, "prod")
round = _eager(_math.around, "round")  # noqa: A001
round_ = round
divmod = _eager(_integer.divmod_, "divmod")  # noqa: A001
bitwise_invert = bitwise_not  # noqa: F821 (NumPy 2's names)
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift  # noqa: F821
acos, acosh, asin, asinh = arccos, arccosh, arcsin, arcsinh  # noqa: F821
atan, atan2, atanh, pow = arctan, arctan2, arctanh, power  # noqa: F821, A001
conjugate, row_stack = conj, vstack  # noqa: F821
cummax = _eager(_reduce.cummax, "cummax")
cummin = _eager(_reduce.cummin, "cummin")
for _n in _dtypes.__all__:  # answers about dtypes, not arrays: nothing to run eagerly
    _g[_n] = getattr(_dtypes, _n)
unfold = _eager(_shape.unfold, "unfold")
broadcast_shapes = _tracer.broadcast_shapes

linalg = _types.SimpleNamespace(norm=_eager(_linalg.norm, "linalg.norm"), matmul=matmul,  # noqa: F821
                                trace=trace, diagonal=diagonal, outer=outer, vecdot=vecdot,  # noqa: F821
                                **{_n: _eager(getattr(_linalg_solve, _n), "linalg." + _n)
                                   for _n in _linalg_solve.__all__})

__all__ = sorted(set(_MATH + _SHAPE + _REDUCE + _LINALG + _CREATION + _INDEX + _SORTING + _QUANTILE
                     + _INTEGER + _numeric.__all__ + _binning.__all__ + _predicates.__all__
                     + _editing.__all__ + _floating.__all__ + _dtypes.__all__ + _array_api.__all__ + _polynomial.__all__ + _construct.__all__
                     + ["acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "pow", "conjugate", "row_stack",
                        "prod", "round", "divmod", "bitwise_invert", "bitwise_left_shift",
                                   "bitwise_right_shift", "cummax", "cummin", "unfold", "broadcast_shapes",
                        "float32", "float16", "bfloat16", "int32", "bool_", "pi", "e", "inf",
                        "nan", "newaxis", "linalg", "generic", "number", "inexact", "floating", "integer",
                        "signedinteger", "unsignedinteger"]))


def functions() -> list[str]:
    """The callable names of this namespace (documented in docs/api.md)."""
    g = globals()
    return [n for n in __all__ if callable(g.get(n)) and not isinstance(g.get(n), (_dt.DType, type))]


del _g, _mod, _names, _n


def _dtype_call(self, x):
    """``lnp.float32(3.0)``, ``lnp.int32(x)``: x as an array of this dtype (as JAX's dtypes)."""
    return astype(asarray(x), self)  # noqa: F821


_dt.DType.__call__ = _dtype_call


def _install_methods():
    """Operators and array methods of Tracer (NumPy's ndarray surface)."""
    T = _tracer.Tracer
    raw = lambda f: getattr(f, "__luminal_raw__", f)  # noqa: E731

    def rev(f):
        return lambda self, other: raw(f)(other, self)

    ops = {
        "__add__": add, "__sub__": subtract, "__mul__": multiply, "__truediv__": true_divide,  # noqa: F821
        "__floordiv__": floor_divide, "__mod__": mod, "__pow__": power, "__matmul__": matmul,  # noqa: F821
        "__lt__": less, "__le__": less_equal, "__gt__": greater, "__ge__": greater_equal,  # noqa: F821
        "__eq__": equal, "__ne__": not_equal, "__and__": bitwise_and, "__or__": bitwise_or,  # noqa: F821
        "__xor__": bitwise_xor, "__lshift__": left_shift, "__rshift__": right_shift,  # noqa: F821
    }
    for k, f in ops.items():
        setattr(T, k, (lambda f: lambda self, other: raw(f)(self, other))(f))
    for k, f in {"__radd__": add, "__rsub__": subtract, "__rmul__": multiply,  # noqa: F821
                 "__rtruediv__": true_divide, "__rfloordiv__": floor_divide, "__rmod__": mod,  # noqa: F821
                 "__rpow__": power, "__rmatmul__": matmul, "__rand__": bitwise_and,  # noqa: F821
                 "__ror__": bitwise_or, "__rxor__": bitwise_xor, "__rlshift__": left_shift,  # noqa: F821
                 "__rrshift__": right_shift}.items():  # noqa: F821  # noqa: F821
        setattr(T, k, rev(f))
    T.__neg__ = lambda self: raw(negative)(self)  # noqa: F821
    T.__pos__ = lambda self: self
    T.__abs__ = lambda self: raw(absolute)(self)  # noqa: F821
    T.__invert__ = lambda self: raw(bitwise_not)(self)  # noqa: F821
    T.__getitem__ = lambda self, idx: _index.getitem(self, idx)
    T.at = property(lambda self: _index._AtIndexer(self))
    T.T = property(lambda self: _shape.transpose(self))
    T.mT = property(lambda self: _shape.swapaxes(self, -1, -2))

    def reshape_(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return _shape.reshape(self, shape, order)

    def transpose_(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = axes[0]
        return _shape.transpose(self, axes or None)

    T.reshape = reshape_
    T.transpose = transpose_
    T.astype = lambda self, dtype: _tracer.cast(self, dtype)
    T.flatten = T.ravel = lambda self: _shape.ravel(self)
    T.squeeze = lambda self, axis=None: _shape.squeeze(self, axis)
    T.swapaxes = lambda self, a, b: _shape.swapaxes(self, a, b)
    T.repeat = lambda self, r, axis=None: _shape.repeat(self, r, axis)
    T.clip = lambda self, lo=None, hi=None: _math.clip(self, lo, hi)
    T.dot = lambda self, o: _linalg.dot(self, o)
    T.take = lambda self, idx, axis=None: _index.take(self, idx, axis)
    T.diagonal = lambda self, offset=0, axis1=0, axis2=1: _linalg.diagonal(self, offset, axis1, axis2)
    for name, f in (("sum", _reduce.sum), ("mean", _reduce.mean), ("max", _reduce.max),
                    ("min", _reduce.min), ("prod", _reduce.prod_), ("any", _reduce.any),
                    ("all", _reduce.all), ("var", _reduce.var), ("std", _reduce.std),
                    ("argmax", _reduce.argmax), ("argmin", _reduce.argmin),
                    ("cumsum", _reduce.cumsum), ("cumprod", _reduce.cumprod)):
        setattr(T, name, (lambda f: lambda self, *a, **k: f(self, *a, **k))(f))
    T.sort = lambda self, axis=-1: _sorting.sort(self, axis)
    T.argsort = lambda self, axis=-1: _sorting.argsort(self, axis)
    T.conj = T.conjugate = lambda self: self
    T.real = property(lambda self: self)


_install_methods()

_index_eager = _eager(_index.getitem, "getitem")

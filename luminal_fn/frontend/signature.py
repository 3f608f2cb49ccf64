"""The signatures of a call: the abstract one that selects a trace (dtypes, shapes with dynamic
axes as symbols, pytree structure, static values) and the concrete one that keys the dispatch
cache, plus the argument checks both paths share."""
from __future__ import annotations

import numpy as np

from ..backends.dlpack import foreign_shape_dtype
from ..ir import dtypes as dt
from ..ir.expr import var
from ..ir.graph import type_str
from .array import Array
from .errors import ArgumentError, DonationError, DTypeError, ShapeError, TracingError
from .tracer import Tracer

SCALARS = (bool, int, float)


class Leaf:
    """How one flattened argument enters the graph."""

    __slots__ = ("path", "dyn")

    def __init__(self, path: str, dyn: dict):
        self.path = path
        self.dyn = dyn  # axis -> symbol name


class Layout:
    """Everything about a call's pytree structure that does not depend on values."""

    __slots__ = ("treedef", "leaves", "donated")

    def __init__(self, treedef, leaves, donated):
        self.treedef = treedef
        self.leaves = leaves
        self.donated = donated  # leaf indices whose Arrays are consumed by the call


def abstract(x, dyn: dict, path: str, fn_name: str):
    """The part of a leaf that selects a trace: dtype and shape with dynamic axes symbolic."""
    t = type(x)
    try:
        if t is Array:
            if x._deleted:
                raise donated_error(fn_name, path)
            shape, d = x.shape, x.dtype
        elif t is np.ndarray:
            shape, d = x.shape, dt.canonicalize(x.dtype)
        elif isinstance(x, np.generic):  # before the Python scalars: np.float64 is a float
            shape, d = (), dt.canonicalize(x.dtype)
        elif isinstance(x, SCALARS):
            if dyn:
                raise ShapeError(f"{fn_name}: dynamic_axes names axes of {path!r}, which is a Python scalar")
            return ("weak", dt.scalar_dtype(x))
        elif isinstance(x, Tracer):
            raise TracingError(f"{fn_name}: argument {path!r} is a traced value of another trace")
        elif hasattr(x, "__dlpack__") or hasattr(x, "__array__"):
            # not np.asarray: CuPy arrays and GPU tensors refuse it, JAX would copy to the host
            shape, npd = foreign_shape_dtype(x, f"{fn_name}: argument {path!r}")
            d = dt.canonicalize(npd)
        else:
            raise ArgumentError(
                f"{fn_name}: argument {path!r} is a {t.__name__}, which is not an array; pass "
                "arrays, Python scalars or pytrees of them, or mark the argument static "
                "(static_argnums/static_argnames)")
    except DTypeError as e:
        raise DTypeError(f"{fn_name}: argument {path!r}: {e}") from None
    if dyn:
        for ax in dyn:
            if ax >= len(shape):
                raise ShapeError(f"{fn_name}: dynamic_axes names axis {ax} of {path!r}, which has "
                                 f"shape {tuple(shape)}")
        shape = tuple(dyn.get(i, s) for i, s in enumerate(shape))
    return (d, shape)


def donated_error(fn_name: str, path: str) -> DonationError:
    return DonationError(
        f"{fn_name}: argument {path!r} is an Array that was donated to an earlier jitted call "
        "(donate_argnums or donate_argnames) and deleted; pass that call's result instead")


def fast_key(args, static_pos, dynamic=None):
    """(dispatch-cache key, leaves) for a call whose arguments are plain leaves (arrays, Python
    scalars) or dicts with str keys / lists / tuples of them, else None. The leaves come out in
    ``pytree.flatten`` order (dict keys sorted). The key is a preorder serialization: shape tuples,
    dtype objects, scalar types and container headers never compare equal to one another (a
    DType equals the NumPy dtype it stands for, and both give one signature), and static
    positions are fixed per function, so two calls of different signatures cannot share a key.

    ``dynamic`` ({leaf index: axes}, from one argument structure's layout) leaves those axes'
    lengths out of the key, so a new sequence length still hits. A call of another structure
    gets different container headers or dtypes, so a mask meant for another structure can only
    make it miss, never share a key."""
    key: list = []
    leaves: list = []
    for i, x in enumerate(args):
        if i in static_pos:
            key.append((i, x))  # hashed by dict.get; an unhashable value falls back to the slow path
            continue
        t = type(x)
        if t is Array or t is np.ndarray:
            key.append(_shape_key(x.shape, len(leaves), dynamic))
            # a DType for Arrays, a NumPy dtype for ndarrays: equal where they name one dtype,
            # and then the two calls have one signature (abstract() canonicalises both)
            key.append(x.dtype)
            leaves.append(x)
        elif t is float or t is int or t is bool:
            key.append(t)
            leaves.append(x)
        elif not _fast_container(x, t, key, leaves, dynamic):
            return None
    return tuple(key), leaves


def _foreign_leaf(x, t, key: list, leaves: list, dynamic) -> bool:
    if not foreign_array(t):
        return False
    key.append(_shape_key(tuple(x.shape), len(leaves), dynamic))
    key.append(x.dtype)  # the library's own dtype object: equal only to its own kind
    leaves.append(x)
    return True


_FOREIGN: dict = {}  # type -> whether it is another library's array (CuPy, PyTorch, JAX)


def foreign_array(t) -> bool:
    """Whether values of type ``t`` are another library's arrays, read through DLPack, whose type
    declares ``shape`` and ``dtype`` (CuPy, PyTorch, JAX): the dispatch cache keys them by shape
    and dtype as it keys NumPy arrays, so a model called on them in a loop skips the general
    flatten and signature each call."""
    known = _FOREIGN.get(t)
    if known is None:
        known = _FOREIGN[t] = (hasattr(t, "__dlpack__") and hasattr(t, "shape") and hasattr(t, "dtype")
                               and not issubclass(t, (np.ndarray, np.generic, Array, Tracer)))
    return known


def _shape_key(shape, k, dynamic):
    if dynamic is None:
        return shape
    axes = dynamic.get(k)
    if axes is None:
        return shape
    return tuple(None if a in axes else d for a, d in enumerate(shape))


def _fast_container(x, t, key: list, leaves: list, dynamic=None) -> bool:
    if t is dict:
        for k in x:
            if type(k) is not str:
                return False
        names = sorted(x)
        key.append(("dict", tuple(names)))
        children = [x[k] for k in names]
    elif t is list or t is tuple:
        key.append((t, len(x)))
        children = x
    else:
        return _foreign_leaf(x, t, key, leaves, dynamic)
    for c in children:
        tc = type(c)
        if tc is Array or tc is np.ndarray:
            key.append(_shape_key(c.shape, len(leaves), dynamic))
            key.append(c.dtype)
            leaves.append(c)
        elif tc is float or tc is int or tc is bool:
            key.append(tc)
            leaves.append(c)
        elif not _fast_container(c, tc, key, leaves, dynamic):
            return False
    return True


def check_dims(leaves, lay, fn_name):
    seen: dict = {}
    for x, spec in zip(leaves, lay.leaves):
        for ax, sym in spec.dyn.items():
            v = np.shape(x)[ax]
            if sym in seen and seen[sym][0] != v:
                raise ShapeError(
                    f"{fn_name}: dynamic dim {sym!r} is {seen[sym][0]} in argument {seen[sym][1]!r} "
                    f"but {v} in {spec.path!r} (axis {ax}); every axis named {sym!r} in dynamic_axes "
                    "must have the same length in one call")
            seen.setdefault(sym, (v, spec.path))


def sig_text(in_avals) -> str:
    return ", ".join(f"{p}: {type_str(d, s)}" + ("{weak}" if w else "") for p, d, s, w in in_avals)


def hashable(v, fn_name, arg):
    try:
        hash(v)
    except TypeError:
        raise ArgumentError(
            f"{fn_name}: static argument {arg!r} of type {type(v).__name__} is not hashable; static "
            "arguments are part of the compile cache key (use a tuple instead of a list, a frozen "
            "dataclass instead of a dict, or pass the value as a traced array)") from None
    return v


def aval_of(a):
    if a[0] == "weak":
        return a[1], (), True
    return a[0], tuple(var(s) if isinstance(s, str) else s for s in a[1]), False

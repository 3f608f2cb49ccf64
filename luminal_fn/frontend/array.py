"""``luminal_fn.Array``: a backend buffer with its shape and dtype, readable with ``np.asarray``."""
from __future__ import annotations

import numpy as np

from ..backends import dlpack as _dlpack
from ..backends import get_backend
from ..ir import dtypes as dt
from .errors import DonationError, TracingError, where


class Array:
    """An immutable array living on a backend's device. Results of jitted functions are Arrays;
    ``lf.device_put`` makes one from NumPy data so weights stay on the device between calls."""

    __slots__ = ("_buf", "_backend", "shape", "dtype", "_deleted", "_host", "__weakref__")
    __array_priority__ = 100.0

    def __init__(self, buf, backend, shape: tuple, dtype: dt.DType):
        self._buf = buf
        self._backend = backend
        self.shape = shape
        self.dtype = dtype
        self._deleted = False
        self._host = None  # a pending host copy (copy_to_host_async), read by np.asarray

    # ---- access ----------------------------------------------------------------------------
    def _check(self):
        if self._deleted:
            to = f"jitted function '{self._deleted}'" if isinstance(self._deleted, str) else "a jitted call"
            raise DonationError(
                f"this Array was donated to {to} (donate_argnums or donate_argnames) and read "
                f"{where(None)}; its buffer now belongs to that call's result: use the result instead")

    @property
    def buffer(self):
        """The backend's own buffer (a NumPy array, CuPy array or MLX array)."""
        self._check()
        return self._buf

    @property
    def backend(self) -> str:
        return self._backend.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __array__(self, dtype=None, copy=None):
        self._check()
        pending = self._host
        out = pending.result() if pending is not None else self._backend.to_numpy(self._buf)
        if dtype is not None and np.dtype(dtype) != out.dtype:
            if copy is False:
                raise ValueError(f"np.asarray(Array, dtype={dtype}, copy=False) would need a copy")
            return out.astype(dtype)
        if copy:
            return np.array(out, copy=True)
        if out is self._buf:
            # The buffer itself (NumPy backend): hand out a read-only view, as JAX does, so that
            # writing through np.asarray(a) cannot change an immutable Array.
            out = out.view()
            out.flags.writeable = False
        return out

    def __luminal_array__(self):
        return self.__array__()

    def copy_to_host_async(self):
        """Start copying this Array to the host without waiting (as ``jax.Array.
        copy_to_host_async``): a later ``np.asarray`` waits only for the work queued before
        this call, not for work queued after it (a decode loop reads step t's token while step
        t+1 runs). Backends whose arrays live on the host do nothing."""
        self._check()
        if self._host is None:
            self._host = self._backend.copy_to_host_async(self._buf)
        return self

    def is_ready(self) -> bool:
        """Whether the work computing this Array has finished, so reading it would not wait (as
        ``jax.Array.is_ready``); never blocks. Always True on the NumPy and MLX backends, whose
        calls return computed arrays; on CUDA it follows a pending host copy's event, else the
        whole stream (False while later work still runs)."""
        self._check()
        return self._backend.is_ready(self._buf, self._host)

    def block_until_ready(self):
        self._check()
        self._backend.synchronize()
        return self

    def item(self, *args):
        return np.asarray(self).item(*args)

    def tolist(self):
        return np.asarray(self).tolist()

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __bool__(self):
        return bool(np.asarray(self))

    def __float__(self):
        return float(np.asarray(self))

    def __int__(self):
        return int(np.asarray(self))

    def __index__(self):
        return int(np.asarray(self))

    def __repr__(self):
        if self._deleted:
            return f"Array(<donated>, shape={self.shape}, dtype={self.dtype})"
        body = np.array2string(np.asarray(self), separator=", ", prefix="Array(")
        return f"Array({body}, dtype={self.dtype}, backend={self.backend})"

    def __setitem__(self, idx, value):
        from .tracer import current

        ctx = current()
        if ctx is not None:  # a side effect on a captured array while tracing
            raise TracingError(
                f"writing into a captured luminal_fn.Array {where(ctx.fn_name)}: tracing is pure "
                "and Arrays are immutable; build the new value with x.at[idx].set(value) and "
                "return it")
        raise TypeError("luminal_fn Arrays are immutable; use x.at[idx].set(value) inside a jitted function")

    def delete(self, donated_to: str | None = None):
        """Free the buffer now; later reads raise (naming ``donated_to``, the jitted function
        that consumed it, when given)."""
        self._buf = None
        self._deleted = donated_to or True

    def is_deleted(self) -> bool:
        return bool(self._deleted)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export per the array-API standard: the buffer itself (no copy) on its own device;
        ``dl_device=(kDLCPU, 0)`` from a GPU gives a host copy, ``copy=True`` always a copy,
        ``copy=False`` never one (BufferError where one is needed)."""
        self._check()
        be, buf = self._backend, self._buf
        src = be.dlpack_source(buf, self.dtype)
        return _dlpack.export(
            src, self.__dlpack_device__(), lambda: be.to_numpy(buf),
            lambda: be.dlpack_source(_copy_buffer(be, buf), self.dtype),
            stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        self._check()
        return _dlpack.as_device(self._buf.__dlpack_device__())

    def astype(self, dtype):
        from . import numpy as lnp

        return lnp.astype(self, dtype)

    @property
    def T(self):
        from . import numpy as lnp

        return lnp.transpose(self)

    def reshape(self, *shape):
        from . import numpy as lnp

        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        return lnp.reshape(self, shape)


def _install_operators():
    """Arithmetic on Arrays outside jit runs eagerly through luminal_fn.numpy."""
    from . import numpy as lnp

    pairs = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
             "floordiv": "floor_divide", "mod": "mod", "pow": "power", "matmul": "matmul",
             "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift",
             "rshift": "right_shift"}
    for short, name in pairs.items():
        f = getattr(lnp, name)
        setattr(Array, f"__{short}__", (lambda f: lambda a, b: f(a, b))(f))
        setattr(Array, f"__r{short}__", (lambda f: lambda a, b: f(b, a))(f))
    for short, name in {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                        "eq": "equal", "ne": "not_equal"}.items():
        f = getattr(lnp, name)
        setattr(Array, f"__{short}__", (lambda f: lambda a, b: f(a, b))(f))
    Array.__hash__ = lambda self: id(self)
    Array.__neg__ = lambda a: lnp.negative(a)
    Array.__abs__ = lambda a: lnp.absolute(a)
    Array.__getitem__ = lambda a, idx: lnp._index_eager(a, idx)
    for name in ("sum", "mean", "max", "min", "argmax", "argmin", "std", "var", "prod", "any", "all"):
        setattr(Array, name, (lambda f: lambda a, *x, **k: f(a, *x, **k))(getattr(lnp, name)))


from . import pytree as _pytree  # noqa: E402

_pytree.register_leaf_type(Array)
_pytree.register_leaf_type(np.ndarray)


def device_put(x, backend=None):
    """Move NumPy data (or an Array from another backend) onto a backend's device once; a
    pytree (dict, list, tuple, ...) of arrays gives the same pytree of Arrays. The data is
    copied, so changing the source later does not change the Array. Inputs are narrowed by the
    boundary rule (float64 -> float32, int64 -> int32)."""
    be = get_backend(backend)
    if type(x) in (dict, list, tuple) or _pytree._is_namedtuple(x) or (
            _pytree.dataclasses.is_dataclass(x) and not isinstance(x, type)):
        return _pytree.tree_map(lambda leaf: _put_leaf(leaf, be), x)
    return _put_leaf(x, be)


def from_dlpack(x, backend=None) -> Array:
    """An Array sharing the memory of ``x`` (a PyTorch tensor, JAX or CuPy array, anything with
    ``__dlpack__``) where the backend's device holds it, as ``jax.dlpack.from_dlpack`` and
    ``torch.from_dlpack`` do: writing into ``x`` later shows in the Array. An array on another
    device (host data bound for the GPU, a GPU array for a host backend) and 64-bit dtypes
    (narrowed to 32 bits by the boundary rule) are copied."""
    be = get_backend(backend)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack: a {type(x).__name__} has no __dlpack__; use device_put "
                        "for NumPy data and Python values")
    try:
        buf = be.from_dlpack(x)
    except (TypeError, ValueError, BufferError, OverflowError) as e:
        raise _named(e, "from_dlpack") from None
    return _array_of(buf, be)


def _named(e: Exception, what: str) -> Exception:
    """``e`` again with ``what`` (the function the user called) in front of its message."""
    try:
        return type(e)(f"{what}: {e}")
    except Exception:  # an exception type that takes other arguments
        return e


def _copy_buffer(be, buf):
    """A same-device copy of a backend buffer."""
    if hasattr(buf, "copy"):  # NumPy and CuPy arrays
        return buf.copy()
    return be.from_numpy(np.array(be.to_numpy(buf), copy=True))


def _array_of(buf, be) -> Array:
    shape, npd = be.buffer_shape_dtype(buf)
    return Array(buf, be, tuple(shape), dt.canonicalize(npd))


def _put_leaf(x, be) -> Array:
    if isinstance(x, Array):
        if x._backend is be:
            return x
        x = np.asarray(x)
    if be.is_buffer(x) and not isinstance(x, np.ndarray):
        return _array_of(x, be)
    if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack__") and not np.isscalar(x):
        try:
            buf = be.from_dlpack(x)
        except TypeError as e:  # a dtype DLPack cannot carry here (bfloat16 into NumPy, ...)
            if not hasattr(x, "__array__"):
                raise _named(e, "device_put") from None
        except (ValueError, BufferError, OverflowError) as e:
            raise _named(e, "device_put") from None
        else:
            if hasattr(buf, "copy"):  # device_put copies: later writes to x must not change the Array
                buf = buf.copy()
            return _array_of(buf, be)
    src = np.asarray(x)
    arr = dt.narrow_array(src, "device_put")
    buf = be.from_numpy(arr)
    if isinstance(buf, np.ndarray) and np.may_share_memory(buf, src):
        buf = buf.copy()  # the caller may change their array later; the Array must not change
    return Array(buf, be, tuple(arr.shape), dt.canonicalize(arr.dtype))

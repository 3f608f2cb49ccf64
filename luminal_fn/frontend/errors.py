"""Errors raised while tracing and calling jitted functions, and where they point in user code."""
from __future__ import annotations

import linecache
import os
import sys

from ..ir import dtypes as _dtypes

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class LuminalError(Exception):
    """Base class of luminal_fn's own errors."""


class TracingError(LuminalError, TypeError):
    """Impure or untraceable code: a Python branch on a traced value, an escaped tracer..."""


class ShapeError(LuminalError, ValueError):
    """Shapes that do not fit the op (mismatch, non-broadcastable, bad axis)."""


class DTypeError(LuminalError, _dtypes.DTypeError):
    """A dtype the op does not support (a TypeError)."""


class IndexError_(LuminalError, IndexError):
    """An index form that cannot be traced with a static output shape."""


class DonationError(LuminalError, RuntimeError):
    """A donated array was used after the call that consumed it."""


class ArgumentError(LuminalError, TypeError):
    """A call whose arguments cannot be traced: a non-array leaf, a non-hashable static
    argument, a signature that does not match a compiled stage."""


# The IR layer raises through this hook so that it needs no import of the front end.
_dtypes.unsupported_error = DTypeError


def _is_user_file(filename: str) -> bool:
    fn = os.path.abspath(filename)
    return not fn.startswith(_PKG_DIR) and not fn.startswith("<frozen")


def _fmt(filename: str, lineno: int, with_source: bool) -> str:
    loc = f"{os.path.basename(filename)}:{lineno}"
    if with_source:
        src = linecache.getline(filename, lineno).strip()
        if src:
            loc += f" (`{src}`)"
    return loc


def user_location(with_source: bool = False) -> str:
    """``file:line`` of the innermost stack frame outside luminal_fn (the user's code)."""
    f = sys._getframe(1)
    while f is not None:
        if _is_user_file(f.f_code.co_filename):
            return _fmt(f.f_code.co_filename, f.f_lineno, with_source)
        f = f.f_back
    return "<unknown>"


def where(fn_name: str | None) -> str:
    loc = user_location()
    return f"in jitted function '{fn_name}' at {loc}" if fn_name else f"at {loc}"


def traceback_location(tb) -> str | None:
    """``file:line (`source`)`` of the innermost user frame in an exception's traceback."""
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if _is_user_file(code.co_filename):
            found = (code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return _fmt(*found, with_source=True) if found else None


def luminal_cause(exc: BaseException) -> LuminalError | None:
    """The LuminalError behind ``exc``: itself, or one NumPy or Python wrapped (NumPy turns a
    TracingError raised by ``float(tracer)`` into "setting an array element with a sequence")."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, LuminalError):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def annotate(exc: LuminalError, fn_name: str, tb) -> LuminalError:
    """Add "in jitted function 'f' at file:line" to an error raised while tracing ``fn_name``
    when its message does not say where yet."""
    msg = str(exc.args[0]) if exc.args else ""
    if "in jitted function '" in msg:
        return exc
    loc = traceback_location(tb)
    if loc is None and f"function '{fn_name}'" in msg:
        return exc
    suffix = f" (in jitted function '{fn_name}'" + (f" at {loc})" if loc else ")")
    exc.args = (msg + suffix,) + tuple(exc.args[1:])
    return exc

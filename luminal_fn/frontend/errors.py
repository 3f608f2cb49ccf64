"""Errors raised while tracing and calling jitted functions, and where they point in user code."""
from __future__ import annotations

import os
import sys

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class LuminalError(Exception):
    """Base class of luminal_fn's own errors."""


class TracingError(LuminalError, TypeError):
    """Impure or untraceable code: a Python branch on a traced value, an escaped tracer..."""


class ShapeError(LuminalError, ValueError):
    """Shapes that do not fit the op (mismatch, non-broadcastable, bad axis)."""


class DTypeError(LuminalError, TypeError):
    """A dtype the op does not support."""


class IndexError_(LuminalError, IndexError):
    """An index form that cannot be traced with a static output shape."""


class DonationError(LuminalError, RuntimeError):
    """A donated array was used after the call that consumed it."""


def user_location() -> str:
    """``file:line`` of the innermost stack frame outside luminal_fn (the user's code)."""
    f = sys._getframe(1)
    while f is not None:
        fn = os.path.abspath(f.f_code.co_filename)
        if not fn.startswith(_PKG_DIR) or os.sep + "tests" + os.sep in fn:
            return f"{os.path.basename(fn)}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


def where(fn_name: str | None) -> str:
    loc = user_location()
    return f"in jitted function '{fn_name}' at {loc}" if fn_name else f"at {loc}"

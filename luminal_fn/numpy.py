"""``luminal_fn.numpy``: NumPy names and semantics over traced arrays (see docs/api.md)."""
from .frontend.numpy import *  # noqa: F401,F403
from .frontend.numpy import __all__, functions, linalg  # noqa: F401

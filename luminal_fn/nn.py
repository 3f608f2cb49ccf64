"""``luminal_fn.nn``: model helpers written with luminal_fn.numpy (see docs/api.md)."""
from .frontend.nn import *  # noqa: F401,F403
from .frontend.nn import __all__  # noqa: F401

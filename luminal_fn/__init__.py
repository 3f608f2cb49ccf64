"""luminal_fn: trace a pure array function, search every implementation in an e-graph, run the
fastest on NumPy, CUDA (CuPy) or MLX.

    import luminal_fn as lf
    import luminal_fn.numpy as lnp

    @lf.jit
    def f(x, w):
        return lnp.maximum(x @ w, 0.0)
"""
from . import backends
from .backends import available_backends, get_backend
from .frontend import numpy as _lnp_impl  # noqa: F401  (installs Tracer methods)
from .frontend.array import Array, _install_operators, device_put, from_dlpack
from .frontend.errors import (ArgumentError, DonationError, DTypeError, LuminalError, ShapeError,
                               TracingError)
from .frontend.jit import Jitted, jit, make_hlir
from .frontend.stages import Compiled, Lowered, Traced
from .frontend.pytree import tree_leaves, tree_map
from .frontend.tracer import Tracer
from .ir import dtypes
from .optimize.options import SearchOptions
from .ir.dtypes import bfloat16, bool_, float16, float32, int32
from . import numpy  # noqa: E402
from . import nn  # noqa: E402

_install_operators()

__version__ = "0.1.0"

__all__ = [
    "jit", "make_hlir", "Array", "device_put", "from_dlpack", "Tracer", "Traced", "Lowered", "Compiled", "Jitted",
    "numpy", "nn", "dtypes", "float32", "float16", "bfloat16", "int32", "bool_", "tree_map",
    "tree_leaves", "get_backend", "available_backends", "backends", "LuminalError", "TracingError",
    "ShapeError", "DTypeError", "DonationError", "ArgumentError", "SearchOptions",
]


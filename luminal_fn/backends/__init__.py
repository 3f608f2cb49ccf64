"""Backends: NumPy (always), CUDA through CuPy, MLX. Each registers itself on import."""
from .base import Backend, BackendUnavailable, Executable, available_backends, get_backend, register_backend
from . import numpy as _numpy  # noqa: F401  (registers "numpy")
from . import cuda as _cuda  # noqa: F401  (registers "cuda"; CuPy is imported only when used)
from . import mlx as _mlx  # noqa: F401  (registers "mlx"; imports mlx itself only when used)

__all__ = ["Backend", "BackendUnavailable", "Executable", "available_backends", "get_backend",
           "register_backend"]

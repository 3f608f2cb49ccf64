"""Backends: NumPy (always), CUDA through CuPy, MLX. Each registers itself on import."""
from .base import Backend, BackendUnavailable, Executable, available_backends, get_backend, register_backend
from . import numpy as _numpy  # noqa: F401  (registers "numpy")

__all__ = ["Backend", "BackendUnavailable", "Executable", "available_backends", "get_backend",
           "register_backend"]

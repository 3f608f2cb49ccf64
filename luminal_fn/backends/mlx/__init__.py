"""The MLX backend: Metal kernels hosted by MLX on Apple silicon, MLX's own ops elsewhere.

Registering the backend imports nothing from mlx; the first use does, and without mlx it
raises :class:`~luminal_fn.backends.base.BackendUnavailable` naming the extra to install.
See docs/mlx.md.
"""
from __future__ import annotations

import numpy as np

from ..base import Backend, BackendUnavailable, register_backend
from ..host_memory import host_memory_budget

INSTALL_HINT = 'pip install "luminal-fn[mlx]"'


def import_mlx():
    """mlx.core, or BackendUnavailable with the install command."""
    try:
        import mlx.core as mx
    except ImportError as e:  # also a broken install (a missing libmlx.so raises ImportError)
        raise BackendUnavailable(
            f"the MLX backend needs the mlx package ({e}); install it with {INSTALL_HINT} "
            "(on Linux that pulls mlx[cpu], the CPU build)") from None
    return mx


def metal_available() -> bool:
    mx = import_mlx()
    try:
        return bool(mx.metal.is_available())
    except Exception:
        return False


class MLXBackend(Backend):
    """``options`` of ``compile``: ``metal`` (True/False; default: whether Metal is available),
    ``matmul`` ("library": mx.matmul, or "generic": the fallback kernel), ``max_memory_mib``
    (the memory budget ``profile`` checks before running a candidate)."""

    name = "mlx"
    # backend kernels beyond the generic kinds that optimizer rules may select (MLX ops in
    # model_kernels.py and row_kernels.py, hand Metal kernels in metal_model.py; the names are spelled here so
    # registering imports nothing from mlx)
    kernel_kinds: frozenset = frozenset({"embedding_bag", "embedding_bag_multi",
                                         "embedding_bag_multi_raw", "dlrm_interact",
                                         "conv2d_bias", "linear_bias", "matmul_t",
                                         "rms_norm_rows", "softmax_rows", "argmax_rows", "scan_rows",
                                         "sort_rows", "argsort_rows", "top_k_rows",  # sort_kernels.py
                                         "arctan2", "arcsin", "arccos"})  # math_kernels.py

    def __init__(self):
        self.mx = import_mlx()
        self.metal = metal_available()

    def device_name(self) -> str:
        if self.metal:
            try:
                return f"metal:{self.mx.metal.device_info().get('device_name', 'gpu')}"
            except Exception:
                return "metal"
        return "mlx-cpu"

    def memory_budget(self) -> int | None:
        # Apple GPUs share the host's memory: a share of what is available, and of the working
        # set Metal recommends
        info = {}
        try:
            info = dict(self.mx.device_info())
        except Exception:
            pass
        return host_memory_budget(info.get("max_recommended_working_set_size") or info.get("memory_size"))

    def from_numpy(self, arr):
        from .ops import to_mlx

        return to_mlx(arr)

    def to_numpy(self, buf):
        from .ops import to_numpy

        return to_numpy(buf)

    def is_buffer(self, x) -> bool:
        return isinstance(x, self.mx.array)

    def buffer_shape_dtype(self, buf) -> tuple:
        from ...ir import dtypes as dt
        from .ops import MX_DTYPES

        name = next(k for k, v in MX_DTYPES.items() if v == buf.dtype)
        return tuple(buf.shape), np.dtype(dt.to_numpy(dt.BY_NAME[name]))

    def nbytes(self, buf) -> int:
        return int(buf.nbytes)

    def compile(self, graph, options=None):
        from .executor import MLXExecutable

        options = dict(options or {})
        use_metal = options.get("metal", self.metal)
        if use_metal and not self.metal:
            raise BackendUnavailable("MLX backend: compile(options={'metal': True}) but "
                                     "mx.metal.is_available() is False on this machine")
        metal = None
        if use_metal:
            from .metal_host import MetalKernels

            metal = MetalKernels(graph, options)
        return MLXExecutable(graph, options, metal)

    def synchronize(self) -> None:
        self.mx.synchronize()


register_backend("mlx", MLXBackend)

__all__ = ["MLXBackend", "INSTALL_HINT", "import_mlx", "metal_available"]

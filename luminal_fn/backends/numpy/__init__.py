"""The NumPy backend: the default on every machine and the reference for the others."""
from __future__ import annotations

import numpy as np

from ..base import Backend, Executable, register_backend
from ..host_memory import host_memory_budget
from .executor import KERNELS, Plan, kernel, read_view
from . import kernels as _kernels  # noqa: F401  (registers fused, fused_reduce, matmul)
from .model_kernels import MODEL_KERNELS, MULTI_TABLE_KERNELS  # registers the model kernels (issue 7)
from .row_kernels import ROW_KERNELS  # registers rms_norm_rows, softmax_rows, argmax_rows, scan_rows
from .rope_kernels import ROPE_KERNELS  # registers rope_half
from .attention_kernels import ATTENTION_KERNELS  # registers attention_rows
from .sort_kernels import SORT_KERNELS  # registers sort_rows, argsort_rows, top_k_rows (ir/composites.py)
from .math_kernels import MATH_KERNELS  # registers arctan2 (ir/composites.py)


class NumpyExecutable(Executable):
    first_run_is_warm = True  # (a plan runs NumPy calls: nothing is compiled on a first run)

    def __init__(self, graph, kernels=None):
        self.plan = Plan(graph, kernels)

    def run(self, inputs, dims):
        return self.plan.run(inputs, dims)

    def memory_bytes(self, dims):
        return self.plan.memory_bytes(dims)

    def describe(self) -> str:
        return f"numpy plan of {len(self.plan.steps)} steps"


class NumpyBackend(Backend):
    name = "numpy"
    kernel_kinds = frozenset(MODEL_KERNELS + MULTI_TABLE_KERNELS + ROW_KERNELS + ROPE_KERNELS + ATTENTION_KERNELS
                            + SORT_KERNELS + MATH_KERNELS)

    def device_name(self) -> str:
        return "cpu"

    def memory_budget(self) -> int | None:
        return host_memory_budget()

    def from_numpy(self, arr):
        return np.asarray(arr, order="C")  # not ascontiguousarray: that turns 0-d into 1-d

    def to_numpy(self, buf):
        return buf

    def is_buffer(self, x) -> bool:
        return isinstance(x, np.ndarray)

    def compile(self, graph, options=None):
        return NumpyExecutable(graph)


register_backend("numpy", NumpyBackend)

__all__ = ["NumpyBackend", "NumpyExecutable", "KERNELS", "kernel", "read_view"]

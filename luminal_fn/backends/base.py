"""The one interface every backend implements, and the registry the rest of the library uses.

A backend turns a graph of kernels (HLIR primitives or its own registered kernel kinds) into an
:class:`Executable`, moves arrays to and from its device, and times candidates for the search.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np

from .compare import Distance, KeptOutput, host_distance, keep_host
from .dlpack import host_from_dlpack


class BackendUnavailable(RuntimeError):
    """The backend's library or device is missing; the message says what to install."""


class Executable:
    """A compiled graph for one backend. ``run`` takes backend buffers in input order and the
    dims map, returns backend buffers in output order."""

    # True where a first run does no one-time work (compiling kernels, capturing graphs), so its
    # time stands for a warm run's: the search then takes a far too slow candidate's first run
    # as its time instead of running it again
    first_run_is_warm = False

    def run(self, inputs: Sequence[Any], dims: dict) -> list:
        raise NotImplementedError

    def profile(self, inputs: Sequence[Any], dims: dict, trials: int, timeout_s: float) -> float:
        """Median seconds per run over ``trials`` runs after one warm-up; raises TimeoutError
        when the warm-up alone exceeds ``timeout_s``."""
        return self.median_seconds(inputs, dims, trials, timeout_s)

    def median_seconds(self, inputs, dims, trials: int, timeout_s: float, what: str = "candidate",
                       whole_budget: bool = False) -> float:
        """Wall-clock median of ``trials`` synchronised runs after one warm-up. TimeoutError when
        the warm-up exceeds ``timeout_s``, or (``whole_budget``) as soon as the time spent on
        this candidate passes it."""
        import time

        start = time.perf_counter()
        self.run(inputs, dims)
        self.synchronize()
        if time.perf_counter() - start > timeout_s:
            raise TimeoutError(f"{what} took longer than {timeout_s} s" + (" (warm-up)" if whole_budget else ""))
        times = []
        for _ in range(trials):
            t0 = time.perf_counter()
            self.run(inputs, dims)
            self.synchronize()
            t1 = time.perf_counter()
            times.append(t1 - t0)
            if whole_budget and t1 - start > timeout_s:
                raise TimeoutError(f"{what} took longer than {timeout_s} s "
                                   f"({len(times)} of {trials} trials done)")
        times.sort()
        return times[len(times) // 2]

    def prepare(self, dims: dict) -> None:
        """Start what a first run at ``dims`` will need, without running (a search prepares a
        generation of candidates before timing them one by one, so a backend may compile them
        side by side). Nothing by default."""

    def memory_bytes(self, dims: dict) -> int | None:
        """Bytes a run at ``dims`` needs beyond its inputs and the graph's values between
        kernels (buffers kept from call to call, a kernel's own scratch); None: not known."""
        return None

    def synchronize(self) -> None:
        pass

    def describe(self) -> str:
        return "executable"


class Backend:
    """Subclasses set ``name`` and implement the methods below.

    What a backend tells the optimizer (which never names a backend):

    * ``kernel_kinds``: the ``CustomOp`` kernel names it runs beyond the HLIR primitives and the
      generic LLIR kinds (fused, fused_reduce, matmul) every backend runs. Extraction offers an
      e-graph ``(Kernel "name" ...)`` node only when its name is listed here.
    * ``rule_sources()``: egglog text of the backend's own rules; each rule names one of the
      fixed rulesets (``expr``, ``fuse``, ``specialize``, ``cleanup``) and may only build terms
      of the constructors in ``optimize/rules/base.egg`` (``Kernel`` for its own kernels).
    """

    name = "base"
    kernel_kinds: frozenset = frozenset()
    # True where a call queues its work and returns before it is done (``Array.is_ready`` says
    # when); False where calls return computed arrays, so running ahead of a result gains nothing
    asynchronous: bool = False

    def rule_sources(self) -> list:
        """egglog rule texts this backend adds to the optimizer's schedule."""
        return []

    def device_name(self) -> str:
        return self.name

    def memory_budget(self) -> int | None:
        """Bytes one search candidate may use when ``SearchOptions.max_memory`` is not given, so
        a candidate that would exhaust the machine is dropped before it runs; None: no default
        budget (the device reports running out as an error the search drops the candidate for)."""
        return None

    def from_numpy(self, arr: np.ndarray):
        raise NotImplementedError

    def from_numpy_many(self, arrs: list) -> list:
        """Several host arrays moved at once (a call's arguments); a device backend may batch
        the copies. The default moves them one by one."""
        return [self.from_numpy(a) for a in arrs]

    def from_dlpack(self, x):
        """A buffer of this backend for an object with ``__dlpack__`` (a PyTorch tensor, JAX or
        CuPy array, ...), sharing its memory where the device allows; the default reads it as a
        NumPy array (the producer's memory when it is host memory, else a host copy) and moves
        that."""
        return self.from_numpy(host_from_dlpack(x, self.name))

    def dlpack_source(self, buf, dtype):
        """The object whose ``__dlpack__`` exports ``buf`` as ``dtype`` (the buffer itself,
        unless the backend stores that dtype as other bits)."""
        return buf

    def to_numpy(self, buf) -> np.ndarray:
        raise NotImplementedError

    def keep_output(self, buf) -> KeptOutput:
        """An output kept to compare later ones with (the search's reference candidate's), where
        ``output_distance`` can read it; the default keeps a host copy."""
        return keep_host(self.to_numpy(buf))

    def output_distance(self, buf, kept: KeptOutput) -> Distance:
        """``buf`` (an output of the kept one's shape) measured against ``kept``; a device
        backend measures on its device, so only the figures come back to the host."""
        return host_distance(self.to_numpy(buf), kept)

    def output_distances(self, bufs: list, kept: list) -> list:
        """[output_distance] of each output against its kept one; a device backend may measure
        them all before reading any figure back."""
        return [self.output_distance(b, k) for b, k in zip(bufs, kept)]

    def copy_to_host_async(self, buf):
        """A pending host copy of ``buf`` (an object whose ``result()`` is the NumPy array) that
        waits only for work queued so far, or None where reading is already immediate."""
        return None

    def is_ready(self, buf, pending) -> bool:
        """Whether ``buf`` is computed, so reading it would not wait (``pending``: its
        copy_to_host_async result, or None); never blocks. Backends that finish the work before
        a call returns (NumPy; MLX evaluates every output) answer True."""
        return True

    def is_buffer(self, x) -> bool:
        return False

    def buffer_shape_dtype(self, buf) -> tuple:
        return tuple(buf.shape), buf.dtype

    def compile(self, graph, options: dict | None = None) -> Executable:
        """An executable for an LLIR graph. Options a backend may use: ``buckets`` ({dim: [(lo,
        hi)]}: plan once per bucket at its largest dims), ``donated`` (input positions the
        caller gives up: an output of the same shape may be written into one in place and
        returned as that very buffer)."""
        raise NotImplementedError

    def synchronize(self) -> None:
        pass

    def nbytes(self, buf) -> int:
        return int(buf.nbytes)


_FACTORIES: dict[str, Callable[[], Backend]] = {}
_INSTANCES: dict[str, Backend] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    _FACTORIES[name] = factory


def available_backends() -> list[str]:
    return sorted(_FACTORIES)


def get_backend(name: str | None = None) -> Backend:
    """The backend by name; ``None`` picks ``$LUMINAL_BACKEND``, else CUDA when CuPy sees a GPU,
    else NumPy."""
    if name is None:
        name = os.environ.get("LUMINAL_BACKEND") or default_backend_name()
    if isinstance(name, Backend):
        return name
    inst = _INSTANCES.get(name)
    if inst is not None:
        return inst
    if name not in _FACTORIES:
        raise ValueError(f"unknown backend {name!r}; available: {', '.join(available_backends())}")
    inst = _INSTANCES[name] = _FACTORIES[name]()
    return inst


def default_backend_name() -> str:
    if "cuda" in _FACTORIES:
        try:
            import cupy  # noqa: F401

            if cupy.cuda.runtime.getDeviceCount() > 0:
                return "cuda"
        except Exception:
            pass
    return "numpy"

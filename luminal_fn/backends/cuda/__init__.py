"""The CUDA backend through CuPy: rendered kernels compiled with NVRTC, cuBLAS, hand kernels,
CUDA graphs.

Registering needs nothing: CuPy is imported the first time the backend is used, and a machine
without it gets :class:`~luminal_fn.backends.base.BackendUnavailable` naming the install command.
"""
from __future__ import annotations

import functools

import numpy as np

from ...ir import dtypes as dt
from ..base import Backend, register_backend
from ..compare import Distance, KeptOutput
from ..dlpack import CUDA_READABLE, dlpack_device_type, host_from_dlpack
from . import distance
from .device import INSTALL_HINT, cupy, cupy_dtype, dtype_of_storage, host_to_storage
from .staging import STAGE_BYTES, HostReadback, HostStaging, LargeUploads

# CustomOp kernel names the optimizer may offer beyond fused/fused_reduce/matmul: the model
# kernels of optimize/rules/specialize_models.egg (lowered in modelkernels.py) and the row kernels
# of specialize_norms.egg (rowkernels.py), rope_half of specialize_rope.egg (ropekernels.py).
# The attr-driven hand kernels of handkernels.py
# (rms_norm, softmax, rope, attention) have no rules yet, so are not listed.
KERNEL_KINDS = frozenset({"embedding_bag", "embedding_bag_multi", "embedding_bag_multi_raw",
                          "dlrm_interact", "conv2d_bias", "linear_bias", "matmul_t",
                          "rms_norm_rows", "softmax_rows", "rope_half",
                          "attention_rows",  # specialize_attention.egg (attentionkernels.py)
                          "argmax_rows",  # specialize_argmax.egg (rowkernels.py)
                          "sort_rows", "argsort_rows", "top_k_rows",  # ir/composites.py (sortkernels.py)
                          "scan_rows",  # ir/composites.py (rowkernels.py)
                          "arctan2", "arcsin", "arccos"})  # ir/composites.py (mathkernels.py)

# DLPack imports of these dtypes are the backend's storage already (bfloat16 is viewed as uint16)
_STORED_AS_IS = frozenset(np.dtype(t) for t in (np.float32, np.float16, np.int32, np.bool_))


class CudaBackend(Backend):
    name = "cuda"
    kernel_kinds = KERNEL_KINDS
    asynchronous = True  # launches are queued on the caller's stream

    def __init__(self):
        self.cp = cupy()  # raises BackendUnavailable without CuPy or a GPU

    def rule_sources(self) -> list:
        return []

    def device_name(self) -> str:
        cp = self.cp
        dev = cp.cuda.Device()
        try:
            name = cp.cuda.runtime.getDeviceProperties(dev.id)["name"].decode()
        except Exception:
            name = "gpu"
        return f"cuda:{dev.id} {name} sm_{dev.compute_capability}"

    # ---- arrays ---------------------------------------------------------------------------------
    @staticmethod
    def _host(arr) -> np.ndarray:
        """A host array as the contiguous storage (bfloat16 as its 16-bit words) a copy sends."""
        return np.ascontiguousarray(host_to_storage(np.asarray(arr)))

    def from_numpy(self, arr):
        if isinstance(arr, self.cp.ndarray):
            return arr
        return self._upload(self._host(arr))

    def _upload(self, host: np.ndarray):
        """A device copy of the contiguous storage array ``host``, sent asynchronously from pinned
        memory (CuPy's blocking copy only past the large buffers' cap)."""
        if host.nbytes <= STAGE_BYTES:
            return self._staging.upload(host)
        out = self._large_uploads.upload(host)
        return out if out is not None else self.cp.asarray(host)

    def from_numpy_many(self, arrs: list) -> list:
        """The small ones sent together: one pinned staging slot and one copy (a decode step's
        positions, scatter index and mask: one copy on the stream instead of three)."""
        out = list(arrs)
        small, hosts = [], []
        for k, a in enumerate(arrs):
            if isinstance(a, self.cp.ndarray):
                continue
            h = self._host(a)
            if 0 < h.nbytes <= STAGE_BYTES:
                small.append(k)
                hosts.append(h)
            else:
                out[k] = self._upload(h)  # (large or empty: sent on its own)
        for k, buf in zip(small, self._staging.upload_many(hosts) if hosts else ()):
            out[k] = buf
        return out

    def from_dlpack(self, x):
        """CUDA memory is shared (``cupy.from_dlpack``, no copy); memory elsewhere (host, other
        devices) is read on the host and moved. A CuPy array of this device is taken as it is:
        it is already a buffer of this backend, ordered by CuPy's current stream like every call
        (the DLPack round trip would cost host time a call and a new object, so a jitted
        function called on the same CuPy arrays could not reuse its last call's table)."""
        cp = self.cp
        if (type(x) is cp.ndarray and x.dtype in _STORED_AS_IS
                and x.data.device_id == cp.cuda.runtime.getDevice()):
            return x
        if dlpack_device_type(x) not in CUDA_READABLE:
            return self.from_numpy(host_from_dlpack(x, self.name))
        try:
            buf = self.cp.from_dlpack(x)
        except Exception as e:
            hint = ("CuPy before 14 has no bfloat16: use lf.device_put(x) (a copy) or convert "
                    "it to float32 first" if "bfloat16" in str(getattr(x, "dtype", "")) else
                    "convert it to a float32, float16, int32 or bool array first")
            raise TypeError(f"cuda backend: cannot import {type(x).__name__} through DLPack "
                            f"({e}); {hint}") from None
        if buf.dtype == dt.to_numpy(dt.bfloat16):  # CuPy 14 reads bfloat16: keep its bits as uint16
            return buf.view(self.cp.uint16)
        if buf.dtype in _STORED_AS_IS:
            return buf
        # the boundary rule: float64, int64, uint16, int8, ... are converted (a copy); a uint16
        # buffer here would otherwise read as bfloat16 bits
        return self.from_numpy(dt.narrow_array(self.cp.asnumpy(buf), "cuda backend: DLPack import"))

    def dlpack_source(self, buf, dtype):
        """bfloat16 is stored as uint16 bits; it exports as bfloat16 where CuPy has the dtype."""
        if dtype != dt.bfloat16:
            return buf
        try:
            return buf.view(dt.to_numpy(dt.bfloat16))
        except Exception as e:
            raise BufferError(f"Array.__dlpack__: this CuPy cannot export bfloat16 ({e}); export "
                              "a.astype(lf.float32), or read np.asarray(a)") from None

    @functools.cached_property
    def _staging(self):  # pinned rings made on first use (CuPy loads only then)
        return HostStaging(self.cp)

    @functools.cached_property
    def _large_uploads(self):
        return LargeUploads(self.cp)

    @functools.cached_property
    def _readback(self):
        return HostReadback(self.cp)

    def to_numpy(self, buf) -> np.ndarray:
        host = self.cp.asnumpy(buf)
        if host.dtype == np.uint16:
            from ...ir import dtypes as dt

            return host.view(dt.to_numpy(dt.bfloat16))
        return host

    def keep_output(self, buf) -> KeptOutput:
        return distance.keep(self.cp, buf, self.to_numpy(buf))

    def output_distance(self, buf, kept: KeptOutput) -> Distance:
        return self.output_distances([buf], [kept])[0]

    def output_distances(self, bufs: list, kept: list) -> list:
        """Measured on the device, a kernel an output: three numbers an output come back, not
        the output (a Llama step's cache, tens of MB a candidate, was most of the search's
        check), all in one read-back."""
        measured = distance.measure(self.cp, bufs, kept)
        return [d if d is not None else Backend.output_distance(self, b, k)
                for d, b, k in zip(measured, bufs, kept)]

    def copy_to_host_async(self, buf):
        """An async copy into a pinned slot, then an event: the result waits for that event only
        (``cupy.asnumpy`` would wait for everything queued on the stream by then, including
        steps queued after this array was made). The copy runs on the read-back's own stream
        after the current stream has written the array. Arrays over the slot size are read the
        ordinary way."""
        # bfloat16's storage (uint16 on the device) is read as bfloat16, as to_numpy reads it
        return self._readback.start(buf, dt.to_numpy(dt.bfloat16) if buf.dtype == np.uint16 else None)

    def is_ready(self, buf, pending) -> bool:
        """A pending host copy answers for its own event; otherwise the current stream does, so
        an array counts as not ready while work queued after it still runs (never wrongly
        ready)."""
        if pending is not None:
            return pending.done()
        return bool(self.cp.cuda.get_current_stream().done)

    def is_buffer(self, x) -> bool:
        return isinstance(x, self.cp.ndarray)

    def buffer_shape_dtype(self, buf) -> tuple:
        return tuple(buf.shape), dtype_of_storage(buf.dtype)

    def nbytes(self, buf) -> int:
        return int(buf.nbytes)

    def synchronize(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()

    # ---- compiling ------------------------------------------------------------------------------
    def compile(self, graph, options=None):
        from .executable import CudaExecutable

        return CudaExecutable(self, graph, options)


register_backend("cuda", CudaBackend)

__all__ = ["CudaBackend", "KERNEL_KINDS", "INSTALL_HINT", "cupy_dtype"]

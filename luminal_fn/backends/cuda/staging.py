"""Small host arrays moved to the device without waiting for it.

``cupy.asarray`` of a NumPy array copies from pageable memory, which orders the copy after all
work already queued on the stream and blocks the host until it ran: a decode step's token,
positions and mask made the host wait for the previous step. Small arrays are instead copied
(on the host) into a ring of pinned slots and sent with an asynchronous copy; a slot is reused
only after the event recorded behind its last copy says that copy is done.
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

STAGE_BYTES = 64 * 1024  # larger arrays take CuPy's own (blocking) path
SLOTS = 64


class HostStaging:
    def __init__(self, cp):
        import cupyx

        self.cp = cp
        self.block = cupyx.empty_pinned((SLOTS * STAGE_BYTES,), dtype=np.uint8)
        self.base = self.block.ctypes.data
        self.events = [None] * SLOTS
        self.next = 0
        self.lock = threading.Lock()  # one backend serves every thread: a slot is one caller's

    def upload(self, host: np.ndarray):
        """A new device array holding ``host`` (contiguous, storage dtype); the host array may be
        changed as soon as this returns."""
        cp = self.cp
        with self.lock:
            k = self.next
            self.next = (k + 1) % SLOTS
            ev = self.events[k]
            if ev is None:
                ev = self.events[k] = cp.cuda.Event(block=False, disable_timing=True)
            else:
                ev.synchronize()  # done long ago unless SLOTS uploads are still queued
            n = host.nbytes
            slot = self.block[k * STAGE_BYTES:k * STAGE_BYTES + n]
            slot[...] = host.reshape(-1).view(np.uint8)
            out = cp.empty(host.shape, dtype=host.dtype)
            if n:
                stream = cp.cuda.get_current_stream()
                out.data.copy_from_host_async(ctypes.c_void_p(self.base + k * STAGE_BYTES), n, stream)
                ev.record(stream)
        return out


__all__ = ["HostStaging", "STAGE_BYTES"]

"""Small arrays moved between host and device without waiting for the device.

``cupy.asarray`` of a NumPy array copies from pageable memory, which orders the copy after all
work already queued on the stream and blocks the host until it ran: a decode step's token,
positions and mask made the host wait for the previous step. Small arrays are instead copied
(on the host) into a ring of pinned slots and sent with an asynchronous copy; a slot is reused
only after the event recorded behind its last copy says that copy is done.

Larger arrays (a long prompt's mask: 4 MB at 1000 tokens, 1.1 ms of host time in
``cupy.array`` on the H200 machine) go the same way through pinned buffers kept per power-of-two
size (``LargeUploads``), up to LARGE_POOL_BYTES in all.

The other way (``HostReadback``): a small device array is copied asynchronously into a pinned
slot with an event behind it, so reading it later waits for that event only, not for work queued
on the stream after it (``cupy.asnumpy`` waits for everything queued so far). Slots are fixed
(no pinned allocation per read: allocating or freeing pinned memory synchronises the device).
The copy runs on a stream of its own, after an event that marks the array as written: the
caller's stream goes on to its next kernel without waiting for the copy engine (in a decode loop,
the greedy token's copy sat between the pick and the next step, with gaps on either side:
~11 us a token on the H200, runs CI and CM).
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

STAGE_BYTES = 64 * 1024  # larger arrays go through LargeUploads' pinned buffers
SLOTS = 64
LARGE_POOL_BYTES = 256 << 20  # pinned memory kept for large uploads; past it, CuPy's blocking path
LARGE_PER_SIZE = 4  # buffers of one size class in flight at once before an upload waits for one


def _send(cp, host: np.ndarray, pinned: np.ndarray, ptr, event):
    """A new device array holding ``host``: its bytes copied into the pinned uint8 array ``pinned``
    (at address ``ptr``), then sent with an asynchronous copy that ``event`` is recorded behind."""
    n = host.nbytes
    pinned[:n] = host.reshape(-1).view(np.uint8)
    out = cp.empty(host.shape, dtype=host.dtype)
    if n:
        stream = cp.cuda.get_current_stream()
        out.data.copy_from_host_async(ptr, n, stream)
        event.record(stream)
    return out


class _PinnedRing:
    """SLOTS pinned slots of STAGE_BYTES handed out in turn; one backend serves every thread,
    so a slot is claimed under the lock."""

    def __init__(self, cp, lock):
        import cupyx

        self.cp = cp
        self.block = cupyx.empty_pinned((SLOTS * STAGE_BYTES,), dtype=np.uint8)
        self.base = self.block.ctypes.data
        self.next = 0
        self.lock = lock

    def _claim(self) -> int:
        """The next slot's index (call with the lock held)."""
        k = self.next
        self.next = (k + 1) % SLOTS
        return k

    def _slot(self, k: int, n: int = STAGE_BYTES):
        """(the first n bytes of slot k as a NumPy view, its address for CUDA copies)."""
        return self.block[k * STAGE_BYTES:k * STAGE_BYTES + n], ctypes.c_void_p(self.base + k * STAGE_BYTES)


class HostStaging(_PinnedRing):
    def __init__(self, cp):
        super().__init__(cp, threading.Lock())
        self.events = [None] * SLOTS

    def _free_slot(self) -> tuple:
        """(the next slot, its event) once the copy from that slot's last use is done (call with
        the lock held)."""
        k = self._claim()
        ev = self.events[k]
        if ev is None:
            ev = self.events[k] = self.cp.cuda.Event(block=False, disable_timing=True)
        else:
            ev.synchronize()  # done long ago unless SLOTS uploads are still queued
        return k, ev

    def upload(self, host: np.ndarray):
        """A new device array holding ``host`` (contiguous, storage dtype); the host array may be
        changed as soon as this returns."""
        with self.lock:
            k, ev = self._free_slot()
            slot, ptr = self._slot(k, host.nbytes)
            return _send(self.cp, host, slot, ptr, ev)

    def upload_many(self, hosts: list) -> list:
        """Device arrays holding ``hosts`` (contiguous, storage dtypes, none empty), sent with
        one copy when they fit one slot together (each at a 256-byte boundary, as cudaMalloc
        aligns): views into one device buffer. Otherwise one upload each."""
        offsets, total = [], 0
        for h in hosts:
            total = -(-total // 256) * 256
            offsets.append(total)
            total += h.nbytes
        if total > STAGE_BYTES:
            return [self.upload(h) for h in hosts]
        cp = self.cp
        with self.lock:
            k, ev = self._free_slot()
            slot, ptr = self._slot(k, total)
            for h, off in zip(hosts, offsets):
                slot[off:off + h.nbytes] = h.reshape(-1).view(np.uint8)
            dev = cp.empty((total,), dtype=np.uint8)
            stream = cp.cuda.get_current_stream()
            dev.data.copy_from_host_async(ptr, total, stream)
            ev.record(stream)
        return [dev[off:off + h.nbytes].view(h.dtype).reshape(h.shape) for h, off in zip(hosts, offsets)]


class LargeUploads:
    """Uploads over STAGE_BYTES: copied on the host into a pinned buffer of the next power of two
    (at least twice STAGE_BYTES), sent with an asynchronous copy, the buffer reused once the event
    behind that copy is done. Buffers are allocated on first need and kept (allocating pinned
    memory synchronises the device); at most LARGE_PER_SIZE a size, LARGE_POOL_BYTES in all."""

    def __init__(self, cp):
        self.cp = cp
        self.lock = threading.Lock()
        self.pools: dict = {}  # size -> [(pinned uint8 array, the event behind its last copy), ...]
        self.turn: dict = {}  # size -> the index of the buffer used last
        self.held = 0

    def _buffer(self, size: int):
        """A free (buffer, event) of ``size`` bytes, or None when the pool is full (call with the
        lock held)."""
        import cupyx

        pool = self.pools.setdefault(size, [])
        for entry in pool:
            if entry[1].done:
                return entry
        if len(pool) < LARGE_PER_SIZE and self.held + size <= LARGE_POOL_BYTES:
            entry = (cupyx.empty_pinned((size,), dtype=np.uint8),
                     self.cp.cuda.Event(block=False, disable_timing=True))
            pool.append(entry)
            self.held += size
            return entry
        if not pool:
            return None
        k = self.turn[size] = (self.turn.get(size, -1) + 1) % len(pool)
        pool[k][1].synchronize()  # every buffer of this size still in flight: wait for the oldest turn
        return pool[k]

    def upload(self, host: np.ndarray):
        """A new device array holding ``host`` (contiguous, storage dtype), or None when no pinned
        buffer can hold it (the caller takes CuPy's path); ``host`` may change once this returns."""
        n = host.nbytes
        size = max(2 * STAGE_BYTES, 1 << (n - 1).bit_length())
        if size > LARGE_POOL_BYTES:
            return None
        with self.lock:
            entry = self._buffer(size)
            if entry is None:
                return None
            buf, ev = entry
            return _send(self.cp, host, buf, ctypes.c_void_p(buf.ctypes.data), ev)


class PendingRead:
    """A device-to-host copy in flight: ``result()`` waits for its event and returns the values
    (copied out of the pinned slot, which is then free for another read)."""

    __slots__ = ("ring", "slot", "event", "shape", "dtype", "value", "source")

    def __init__(self, ring, slot, event, shape, dtype, source=None):
        self.ring, self.slot, self.event, self.shape, self.dtype = ring, slot, event, shape, dtype
        self.value = None
        self.source = source  # the device array, kept from the memory pool until its copy is done

    def done(self) -> bool:
        """Whether the copy has finished (result() would not wait); never blocks."""
        return self.value is not None or bool(self.event.done)

    def result(self) -> np.ndarray:
        if self.value is None:
            with self.ring.lock:
                if self.value is None:
                    self.event.synchronize()
                    n = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
                    raw, _ = self.ring._slot(self.slot, n)
                    value = raw.view(self.dtype).reshape(self.shape).copy()
                    value.flags.writeable = False  # handed out by every np.asarray of the Array
                    self.value = value
                    self.source = None
                    if self.ring.owner[self.slot] is self:
                        self.ring.owner[self.slot] = None
        return self.value


class HostReadback(_PinnedRing):
    def __init__(self, cp):
        super().__init__(cp, threading.RLock())  # re-entered: a slot's old read resolves first
        self.owner = [None] * SLOTS  # the PendingRead whose values a slot still holds
        self.events = [None] * SLOTS  # one per slot, re-recorded once the slot's last read is done
        self.written = [None] * SLOTS  # one per slot: the caller's stream has written the array
        self.stream = None  # the copies' own stream, made on first use

    def start(self, buf, host_dtype=None):
        """A PendingRead of the contiguous CuPy array ``buf`` (at most STAGE_BYTES), its bytes
        read as ``host_dtype`` (same item size; default buf's), or None for larger or
        non-contiguous arrays (read them the ordinary way)."""
        n = buf.nbytes
        if n > STAGE_BYTES or not buf.flags.c_contiguous:
            return None
        cp = self.cp
        with self.lock:
            k = self._claim()
            prev = self.owner[k]
            if prev is not None:
                prev.result()  # its values move out of the slot first (done long ago, normally)
            if self.stream is None:
                self.stream = cp.cuda.Stream(non_blocking=True)
            ev, written = self.events[k], self.written[k]
            if ev is None:
                ev = self.events[k] = cp.cuda.Event(block=False, disable_timing=True)
                written = self.written[k] = cp.cuda.Event(block=False, disable_timing=True)
            written.record(cp.cuda.get_current_stream())
            self.stream.wait_event(written)
            if n:
                buf.data.copy_to_host_async(self._slot(k)[1], n, self.stream)
            ev.record(self.stream)
            pending = self.owner[k] = PendingRead(self, k, ev, tuple(buf.shape),
                                                  np.dtype(host_dtype or buf.dtype), buf)
        return pending


__all__ = ["HostStaging", "HostReadback", "LargeUploads", "PendingRead", "STAGE_BYTES"]

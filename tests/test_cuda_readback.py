"""The CUDA backend's pinned read-back ring (backends/cuda/staging.py, HostReadback) on the CPU:
a stand-in for CuPy whose "device" arrays are NumPy arrays and whose copies are memmoves, so the
slot bookkeeping is checked without a GPU: every pending read keeps its own values after its slot
has been reused many times over, and arrays over the slot size take the ordinary path (None).
The upload ring (HostStaging.upload_many) is checked the same way: a call's small arguments go in
one copy, as views at 256-byte offsets of one device buffer."""
import ctypes
import sys
import types

import numpy as np
import pytest


class _Event:
    def __init__(self, **_):
        pass

    def record(self, stream):
        pass

    def synchronize(self):
        pass


class _Pointer:
    def __init__(self, arr):
        self.arr = arr

    def copy_to_host_async(self, dst, n, stream):
        ctypes.memmove(dst.value, self.arr.ctypes.data, n)


class _DeviceArray:
    def __init__(self, a):
        self.a = np.array(a, copy=True, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        self.data, self.nbytes, self.shape, self.dtype, self.flags = (
            _Pointer(self.a), self.a.nbytes, self.a.shape, self.a.dtype, self.a.flags)


class _Stream:
    """The read-back's own stream: records which events it waited for."""

    def __init__(self, **_):
        self.waited = []

    def wait_event(self, event):
        self.waited.append(event)


@pytest.fixture
def ring(monkeypatch):
    fake_cupyx = types.ModuleType("cupyx")
    fake_cupyx.empty_pinned = lambda shape, dtype: np.empty(shape, dtype)
    monkeypatch.setitem(sys.modules, "cupyx", fake_cupyx)
    from luminal_fn.backends.cuda.staging import HostReadback

    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(Event=_Event, Stream=_Stream,
                                                          get_current_stream=lambda: None))
    return HostReadback(cp)


def test_pending_reads_keep_their_values_across_slot_reuse(ring):
    from luminal_fn.backends.cuda.staging import SLOTS

    n = 2 * SLOTS + 5
    pending = [ring.start(_DeviceArray(np.full((2, 3), k, np.int32))) for k in range(n)]
    for k, p in enumerate(pending):
        got = p.result()
        assert got.shape == (2, 3) and got.dtype == np.int32 and (got == k).all(), k
        assert not got.flags.writeable  # the same array comes back for every read of the Array
    scalar = ring.start(_DeviceArray(np.float32(2.5).reshape(())))
    assert scalar.result().shape == () and float(scalar.result()) == 2.5


def test_a_read_waits_for_the_writer_and_keeps_its_source_until_read(ring):
    """The copy runs on the read-back's own stream after an event recorded on the caller's (the
    array's writer), and the pending read holds the device array until its values are out (so
    the memory pool cannot hand it to later work on the caller's stream while the copy waits)."""
    src = _DeviceArray(np.arange(4, dtype=np.int32))
    pending = ring.start(src)
    assert ring.stream is not None and ring.stream.waited == [ring.written[pending.slot]]
    assert pending.source is src
    np.testing.assert_array_equal(pending.result(), np.arange(4))
    assert pending.source is None


def test_large_or_strided_arrays_take_the_ordinary_path(ring):
    from luminal_fn.backends.cuda.staging import STAGE_BYTES

    assert ring.start(_DeviceArray(np.zeros(STAGE_BYTES // 4 + 1, np.float32))) is None
    strided = _DeviceArray(np.zeros((4, 4), np.float32))
    strided.flags = np.zeros((4, 4), np.float32)[:, ::2].flags
    assert ring.start(strided) is None


def test_a_read_can_name_the_host_dtype_of_its_bytes(ring):
    """bfloat16 lives as uint16 on the CUDA backend; the read hands it back as bfloat16."""
    from luminal_fn.ir import dtypes as dt

    bf16 = dt.to_numpy(dt.bfloat16)
    want = np.array([1.5, -2.0, 0.25], bf16)
    got = ring.start(_DeviceArray(want.view(np.uint16)), bf16).result()
    assert got.dtype == bf16
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


# ---- the other way: HostStaging.upload_many (a call's small host arguments in one copy) ----------
class _DeviceBuffer(np.ndarray):
    """A stand-in CuPy array: a NumPy array whose ``data`` takes an async copy from the host."""

    @property
    def data(self):
        arr = self

        class _Dst:
            def copy_from_host_async(self, src, n, stream):
                ctypes.memmove(arr.ctypes.data, src.value, n)

        return _Dst()


@pytest.fixture
def staging(monkeypatch):
    fake_cupyx = types.ModuleType("cupyx")
    fake_cupyx.empty_pinned = lambda shape, dtype: np.empty(shape, dtype)
    monkeypatch.setitem(sys.modules, "cupyx", fake_cupyx)
    from luminal_fn.backends.cuda.staging import HostStaging

    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(Event=_Event, get_current_stream=lambda: None),
                               empty=lambda shape, dtype: np.empty(shape, dtype).view(_DeviceBuffer))
    return HostStaging(cp)


def test_small_arguments_share_one_copy_and_keep_their_values(staging):
    from luminal_fn.backends.cuda.staging import SLOTS

    for rep in range(2 * SLOTS + 3):  # every slot reused: each call's arrays keep their own values
        hosts = [np.arange(3, dtype=np.int32) + rep, np.full((2, 2), rep, np.uint16),
                 np.float32(rep + 0.5).reshape(()), np.arange(5) % 2 == rep % 2]
        got = staging.upload_many(hosts)
        bases = {g.base.ctypes.data if g.base is not None else g.ctypes.data for g in got}
        for g, h in zip(got, hosts):
            assert g.dtype == h.dtype and g.shape == h.shape
            np.testing.assert_array_equal(np.asarray(g), h)
            assert g.ctypes.data % 256 == np.asarray(got[0]).ctypes.data % 256  # 256-byte offsets
        assert len(bases) == 1, "one device buffer (one copy) for the whole call"


def test_arguments_over_one_slot_together_are_sent_one_by_one(staging):
    from luminal_fn.backends.cuda.staging import STAGE_BYTES

    hosts = [np.ones(STAGE_BYTES // 8, np.float32) * k for k in (1, 2, 3)]  # 1.5 slots in all
    got = staging.upload_many(hosts)
    for g, h in zip(got, hosts):
        np.testing.assert_array_equal(np.asarray(g), h)
    assert len({g.ctypes.data for g in got}) == 3


# ---- large uploads: LargeUploads (pinned buffers per power-of-two size, reused after their copy) --
class _PendingEvent:
    """An event whose copy is done only after ``synchronize`` (or when marked done)."""

    made = []

    def __init__(self, **_):
        self.done = False
        self.waited = 0
        _PendingEvent.made.append(self)

    def record(self, stream):
        self.done = False

    def synchronize(self):
        self.waited += 1
        self.done = True


@pytest.fixture
def large(monkeypatch):
    fake_cupyx = types.ModuleType("cupyx")
    fake_cupyx.empty_pinned = lambda shape, dtype: np.empty(shape, dtype)
    monkeypatch.setitem(sys.modules, "cupyx", fake_cupyx)
    from luminal_fn.backends.cuda.staging import LargeUploads

    _PendingEvent.made = []
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(Event=_PendingEvent, get_current_stream=lambda: None),
                               empty=lambda shape, dtype: np.empty(shape, dtype).view(_DeviceBuffer))
    return LargeUploads(cp)


def test_large_uploads_reuse_a_buffer_only_after_its_copy(large):
    from luminal_fn.backends.cuda import staging

    mask = np.arange(1_000_000, dtype=np.float32).reshape(1000, 1000)  # 4 MB: a 1000-token prompt's
    got = [large.upload(mask + k) for k in range(staging.LARGE_PER_SIZE)]  # all in flight: one buffer each
    assert list(large.pools) == [4 << 20] and len(large.pools[4 << 20]) == staging.LARGE_PER_SIZE
    for k, g in enumerate(got):
        assert g.shape == mask.shape and g.dtype == mask.dtype
        np.testing.assert_array_equal(np.asarray(g), mask + k)
    assert not any(e.waited for e in _PendingEvent.made)
    again = large.upload(mask + 9)  # every buffer of the size busy: it waits for one, allocates none
    np.testing.assert_array_equal(np.asarray(again), mask + 9)
    assert len(large.pools[4 << 20]) == staging.LARGE_PER_SIZE and sum(e.waited for e in _PendingEvent.made) == 1
    for e in _PendingEvent.made:
        e.done = True
    large.upload(np.ones(300_000, np.int32))  # a done buffer is reused; another size has its own
    assert sorted(large.pools) == [2 << 20, 4 << 20] and large.held == (2 << 20) + staging.LARGE_PER_SIZE * (4 << 20)


def test_uploads_past_the_pool_take_the_ordinary_path(large, monkeypatch):
    from luminal_fn.backends.cuda import staging

    monkeypatch.setattr(staging, "LARGE_POOL_BYTES", 1 << 20)
    assert large.upload(np.zeros(1 << 19, np.float32)) is None  # 2 MiB: over the whole pool
    assert large.upload(np.zeros(1 << 17, np.float32)) is not None  # 512 KiB fits
    assert large.upload(np.zeros(1 << 17, np.float32)) is not None  # a second buffer (the first in flight)
    assert large.upload(np.zeros(1 << 18, np.float32)) is None  # 1 MiB more would pass the cap

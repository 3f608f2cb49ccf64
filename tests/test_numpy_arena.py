"""The NumPy plan's arena: buffers kept from call to call (backends/numpy/arena.py).

Checked against float64 NumPy references: results stay right over many calls (buffers hold stale
values from the previous call), results handed back never share memory with the arena or with
each other, concurrent calls from threads do not clobber each other, and the lifetime rule keeps
a value alive while a later step may hold a view of it.
"""
from __future__ import annotations

import threading

import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy.arena import Layout, Request, lifetimes


def _jit(fn):
    return lf.jit(fn, backend="numpy", search=lf.SearchOptions(limit=1, cache=False, progress=False))


def _plan(jf):
    (compiled,) = jf.compiled()
    (plan,) = compiled.runner.plans.values()
    return plan.executable.plan


def _block(x, w1, w2):
    h = lnp.tanh(x @ w1) * 0.5 + x @ w1
    m = lnp.max(h, axis=-1, keepdims=True)
    e = lnp.exp(h - m)
    return (e / lnp.sum(e, axis=-1, keepdims=True)) @ w2, h


def _reference(x, w1, w2):
    x, w1, w2 = (a.astype(np.float64) for a in (x, w1, w2))
    h = np.tanh(x @ w1) * 0.5 + x @ w1
    e = np.exp(h - h.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ w2, h


def _data(rng, n=24, d=16, k=32):
    return (rng.standard_normal((n, d)).astype(np.float32),
            (rng.standard_normal((d, k)) / 4).astype(np.float32),
            rng.standard_normal((k, d)).astype(np.float32))


def test_steady_state_calls_reuse_buffers_and_stay_correct():
    rng = np.random.default_rng(0)
    jf = _jit(_block)
    args = _data(rng)
    jf(*args)
    plan = _plan(jf)
    assert plan.layout.nbytes > 0  # matmuls and fused kernels write into the arena
    assert any(slots is not None for slots in plan.layout.per_step)
    kept = []
    for i in range(5):  # new inputs each call: stale buffers from the last call must not leak in
        args = _data(np.random.default_rng(10 + i))
        out, h = (np.asarray(a) for a in jf(*args))
        ref_out, ref_h = _reference(*args)
        np.testing.assert_allclose(out, ref_out, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(h, ref_h, rtol=1e-5, atol=1e-5)
        kept.append((out, h, ref_out))
    # results of earlier calls were not overwritten by later calls
    for out, h, ref_out in kept:
        np.testing.assert_allclose(out, ref_out, rtol=1e-4, atol=1e-5)
    arena = plan._arenas.take()
    buffers = [b for bufs in arena if bufs is not None for b in bufs]
    plan._arenas.give(arena)
    for out, h, _ in kept:
        assert not np.shares_memory(out, h)
        assert not any(np.shares_memory(out, b) or np.shares_memory(h, b) for b in buffers)


def test_inputs_are_never_written():
    rng = np.random.default_rng(1)
    jf = _jit(_block)
    args = _data(rng)
    copies = [a.copy() for a in args]
    for _ in range(3):
        jf(*args)
    for a, c in zip(args, copies):
        np.testing.assert_array_equal(a, c)


def test_threads_calling_one_plan_get_their_own_buffers():
    jf = _jit(_block)
    jf(*_data(np.random.default_rng(2)))
    datas = [_data(np.random.default_rng(100 + t)) for t in range(4)]
    refs = [_reference(*d)[0] for d in datas]
    errors = []

    def work(t):
        for _ in range(30):
            out = np.asarray(jf(*datas[t])[0])
            if not np.allclose(out, refs[t], rtol=1e-4, atol=1e-5):
                errors.append(t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_a_value_lives_while_a_later_step_may_view_it():
    # step 0 writes value 10 into the arena; step 1 allocates for itself and may return a view of
    # 10 (value 11); step 2 reads 11; so 10 must stay untouched until step 2
    flow = [((10,), [], True), ((11,), [10], False), ((12,), [], True), ((13,), [11, 12], True)]
    end = lifetimes(flow, outputs=[13])
    assert end[10] == 3 and end[11] == 3 and end[13] == float("inf")
    f32 = np.dtype(np.float32)
    reqs = [(Request((4,), f32, 10),), None, (Request((4,), f32, 12),), (Request((4,), f32, 13),)]
    layout = Layout(reqs, end)
    (b0, _), = layout.per_step[0]
    (b2, _), = layout.per_step[2]
    assert b0 != b2  # 12 must not overwrite 10 while 11 may still view it
    assert layout.per_step[3] is None  # a plan output is never arena memory


def test_scratch_is_shared_between_steps_whose_values_do_not_overlap():
    f32 = np.dtype(np.float32)
    flow = [((1,), [], True), ((2,), [1], True), ((3,), [2], True)]
    end = lifetimes(flow, outputs=[])
    reqs = [(Request((8,), f32, 1), Request((8,), f32)),
            (Request((8,), f32, 2), Request((8,), f32)),
            (Request((8,), f32, 3),)]
    layout = Layout(reqs, end)
    # value 1 and step 0's scratch are dead once step 1 ran: step 2 reuses one of their buffers
    assert len(layout.sizes) == 3
    used = [{b for b, _ in slots} for slots in layout.per_step]
    assert len(used[0]) == 2 and len(used[1]) == 2 and not (used[1] & {layout.per_step[0][0][0]})
    arena = layout.new_arena()
    assert [a.shape for bufs in arena for a in bufs] == [(8,)] * 5

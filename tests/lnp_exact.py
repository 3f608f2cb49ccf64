"""Shared helpers for tests whose results must match NumPy exactly (movement and indexing).

Cases are written once as ``f(xp, *arrays)`` and run with ``xp=luminal_fn.numpy`` inside
``lf.jit`` and with ``xp=numpy`` as the reference.
"""
import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp

DTYPES = [np.float32, np.int32, np.bool_, np.float16]


def make(shape, dtype=np.float32, seed=0):
    r = np.random.default_rng(seed)
    if dtype == np.bool_:
        return r.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        return r.integers(-9, 10, shape).astype(dtype)
    return r.standard_normal(shape).astype(dtype)


def _narrow(a):
    a = np.asarray(a)
    return a.astype({np.dtype(np.int64): np.int32, np.dtype(np.float64): np.float32}.get(a.dtype, a.dtype))


def assert_same(got, want):
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    g, w = np.asarray(got), _narrow(want)
    assert g.shape == w.shape, f"shape {g.shape} != NumPy's {w.shape}"
    assert g.dtype == w.dtype, f"dtype {g.dtype} != NumPy's {w.dtype}"
    np.testing.assert_array_equal(g, w)  # movement and indexing are exact


def check(f, *args, dyn=None):
    got = lf.jit(lambda *a: f(lnp, *a), dynamic_axes=dyn)(*args)
    assert_same(got, f(np, *args))
    return got

"""Dtypes: spellings, the boundary narrowing rule, promotion, and dtypes at the jit boundary."""
import copy
import pickle

import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
from luminal_fn.ir import dtypes as dt


@pytest.mark.parametrize("spelling,expected", [
    ("float32", dt.float32), (np.float32, dt.float32), (np.dtype("float16"), dt.float16),
    (float, dt.float32), (int, dt.int32), (bool, dt.bool_), ("bool_", dt.bool_),
    (ml_dtypes.bfloat16, dt.bfloat16), (dt.int32, dt.int32), (np.int64, dt.int32),
    (np.float64, dt.float32), (np.uint8, dt.int32), (np.dtype(">f4"), dt.float32),
])
def test_canonicalize_spellings(spelling, expected):
    assert dt.canonicalize(spelling) is expected


@pytest.mark.parametrize("bad", [np.complex64, np.complex128, "U3", object, "not-a-dtype"])
def test_unsupported_dtypes_raise_luminal_dtype_error(bad):
    with pytest.raises(lf.DTypeError, match="unsupported dtype") as info:
        dt.canonicalize(bad)
    assert isinstance(info.value, lf.LuminalError) and isinstance(info.value, TypeError)


@pytest.mark.parametrize("src,target", [
    (np.float64, np.float32), (np.int64, np.int32), (np.uint32, np.int32), (np.uint64, np.int32),
    (np.int16, np.int32), (np.uint8, np.int32), (np.float16, np.float16), (np.bool_, np.bool_),
])
def test_narrowing_converts_values_exactly(src, target):
    x = np.array([0, 1, 7, 100], dtype=src)
    y = dt.narrow_array(x, "x")
    assert y.dtype == np.dtype(target)
    np.testing.assert_array_equal(y.astype(np.float64), x.astype(np.float64))


def test_narrowing_keeps_int32_extremes_and_rejects_beyond():
    ok = np.array([-2**31, 2**31 - 1], np.int64)
    np.testing.assert_array_equal(dt.narrow_array(ok), ok)
    for bad in (np.array([2**31], np.int64), np.array([-2**31 - 1], np.int64),
                np.array([2**32 + 5], np.uint64), np.array([2**31], np.uint32)):
        with pytest.raises(OverflowError, match="argument 'q'.*int32 range"):
            dt.narrow_array(bad, "argument 'q'")


def test_float64_narrowing_rounds_but_never_overflows_silently():
    x = np.array([1.0 / 3.0, -2.5e38, np.inf, -np.inf, np.nan], np.float64)
    y = dt.narrow_array(x)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y[:4], x[:4].astype(np.float32))
    assert np.isnan(y[4])
    with pytest.raises(OverflowError, match="float32 range"):
        dt.narrow_array(np.array([1e39]), "w")


def test_big_endian_input_is_read_at_the_right_width():
    x = np.array([1.5, -2.25, 3.0], dtype=">f4")
    y = dt.narrow_array(x)
    assert y.dtype == np.dtype("float32") and y.dtype.byteorder in "=<|"
    np.testing.assert_array_equal(y, [1.5, -2.25, 3.0])


def test_promotion_lattice():
    assert dt.promote(dt.int32, dt.float16) is dt.float16
    assert dt.promote(dt.float16, dt.bfloat16) is dt.float32
    assert dt.promote(dt.bool_, dt.int32) is dt.int32
    assert dt.promote(dt.bfloat16, dt.float32) is dt.float32
    assert dt.promote_weak(dt.int32, 0.5) is dt.float32
    assert dt.promote_weak(dt.float16, 2) is dt.float16
    assert dt.promote_weak(dt.bool_, 3) is dt.int32


def test_dtypes_are_singletons_through_pickle_and_copy():
    for d in dt.ALL:
        assert pickle.loads(pickle.dumps(d)) is d
        assert copy.deepcopy(d) is d
        assert {d: 1}[dt.canonicalize(d.name)] == 1
    assert dt.to_numpy(dt.bfloat16) == np.dtype(ml_dtypes.bfloat16)


def test_jit_narrows_int64_and_float64_arguments():
    @lf.jit
    def f(i, x):
        return i * 2, x + 0.5

    i = np.array([3, -(2**31), 2**31 - 1], np.int64)
    ri, rx = f(i, np.array([1.0, 2.0]))
    assert ri.dtype == lf.int32 and rx.dtype == lf.float32
    np.testing.assert_array_equal(np.asarray(ri), (i.astype(np.int32) * 2).astype(np.int32))
    np.testing.assert_array_equal(np.asarray(rx), np.array([1.5, 2.5], np.float32))
    # a float64 array and a float32 array of the same shape share the trace
    f(i.astype(np.int32), np.array([1.0, 2.0], np.float32))
    assert f.trace_count == 1


def test_jit_int64_overflow_names_the_argument():
    @lf.jit
    def f(params):
        return params["ids"] + 1

    with pytest.raises(OverflowError, match=r"f: argument 'params/ids'.*int32 range"):
        f({"ids": np.array([1, 2**40], np.int64)})
    f({"ids": np.array([1, 2], np.int64)})  # compiled now; the dispatch path checks too
    with pytest.raises(OverflowError, match="params/ids"):
        f({"ids": np.array([2**33], np.int64)})

    @lf.jit
    def g(x, k):
        return x * k

    with pytest.raises(OverflowError, match="argument 'k'"):
        g(np.ones(2, np.int32), 2**35)
    with pytest.raises(OverflowError, match="argument 'k'.*float32 range"):
        g(np.ones(2, np.float32), 1e39)
    np.testing.assert_array_equal(np.asarray(g(np.ones(2, np.float32), float("inf"))), [np.inf, np.inf])


def test_jit_bfloat16_and_float16_inputs():
    bf = ml_dtypes.bfloat16

    @lf.jit
    def f(a, h):
        return a * 2.0 + 1.0, h * 3

    a = np.array([1.5, -2.0, 0.25], bf)
    h = np.array([0.5, 1.0, 2.0], np.float16)
    ra, rh = f(a, h)
    assert ra.dtype == lf.bfloat16 and np.asarray(ra).dtype == np.dtype(bf)
    assert rh.dtype == lf.float16
    np.testing.assert_array_equal(np.asarray(ra).astype(np.float32), [4.0, -3.0, 1.5])
    np.testing.assert_array_equal(np.asarray(rh), np.array([1.5, 3.0, 6.0], np.float16))
    # the Array form of a bf16 input dispatches to the same trace
    f(lf.device_put(a), h)
    assert f.trace_count == 1


def test_jit_complex_argument_is_a_dtype_error_naming_it():
    @lf.jit
    def f(x, z):
        return x + z

    with pytest.raises(lf.DTypeError, match=r"f: argument 'z': unsupported dtype complex64"):
        f(np.ones(2, np.float32), np.ones(2, np.complex64))

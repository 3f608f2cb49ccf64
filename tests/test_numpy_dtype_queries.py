"""The dtype surface NumPy and JAX code relies on: a traced array's dtype compares and hashes
like the NumPy dtype, dtypes are callable, and finfo / iinfo / issubdtype / isdtype /
promote_types / can_cast answer as NumPy does (bfloat16 is a real floating type, as in JAX)."""
import ml_dtypes
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

BF16 = np.dtype(ml_dtypes.bfloat16)
PAIRS = [(lf.float32, np.float32), (lf.float16, np.float16), (lf.bfloat16, BF16), (lf.int32, np.int32),
         (lf.bool_, np.bool_)]


@pytest.mark.parametrize("ours,theirs", PAIRS)
def test_a_dtype_equals_and_hashes_as_its_numpy_dtype(ours, theirs):
    npd = np.dtype(theirs)
    assert ours == npd and npd == ours and ours == theirs and ours == npd.name
    assert not (ours != npd)
    assert hash(ours) == hash(npd) and {npd: "hit"}[ours] == "hit"
    assert np.dtype(ours) == npd and ours.type is npd.type
    others = [d for d, _ in PAIRS if d is not ours]
    assert all(ours != d and ours != np.dtype(t) for d, t in PAIRS if d is not ours), others
    assert ours != None and ours != 3 and ours != "no such dtype"  # noqa: E711


def test_a_traced_dtype_compares_with_numpy_spellings():
    @lf.jit
    def f(x):
        assert x.dtype == np.float16 and x.dtype == "float16" and x.dtype != np.float32
        assert np.issubdtype(x.dtype, np.floating) and lnp.issubdtype(x.dtype, lnp.floating)
        return x * 2

    np.testing.assert_array_equal(f(np.array([1.5, -2], np.float16)), np.array([3, -4], np.float16))


def test_dtypes_are_callable_like_numpys_and_jaxs():
    v = lnp.float32(3)
    assert v.dtype == np.float32 and float(v) == 3.0 and np.asarray(v).shape == ()
    np.testing.assert_array_equal(lnp.int32(np.array([1.7, -2.2])), np.array([1, -2], np.int32))

    @lf.jit
    def f(x):
        return lnp.float32(x) + lnp.bfloat16(0.5)

    out = f(np.array([1, 2], np.int32))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([1.5, 2.5], np.float32))


@pytest.mark.parametrize("d", [lf.float32, lf.float16, np.float16, "float32", np.dtype(np.float32)])
def test_finfo_is_numpys(d):
    want = np.finfo(np.dtype(d))
    got = lnp.finfo(d)
    assert (got.min, got.max, got.eps, got.tiny, got.bits) == (want.min, want.max, want.eps, want.tiny, want.bits)


def test_finfo_of_bfloat16_and_of_arrays_and_iinfo():
    got, want = lnp.finfo(lf.bfloat16), ml_dtypes.finfo(ml_dtypes.bfloat16)
    assert (got.min, got.max, got.eps) == (want.min, want.max, want.eps)
    assert lnp.finfo(np.ones(2, np.float16)).max == np.finfo(np.float16).max
    assert lnp.finfo(lnp.ones(2, dtype=lnp.bfloat16)).eps == want.eps
    assert (lnp.iinfo(lf.int32).min, lnp.iinfo(np.int32).max) == (-2**31, 2**31 - 1)
    with pytest.raises(lf.DTypeError, match="finfo: int32 is not a floating"):
        lnp.finfo(lf.int32)
    with pytest.raises(lf.DTypeError, match="iinfo: float32 is not an integer"):
        lnp.iinfo(lf.float32)


@pytest.mark.parametrize("d,kind,want", [
    (lf.float32, lnp.floating, True), (lf.float16, lnp.inexact, True), (lf.int32, lnp.floating, False),
    (lf.int32, lnp.signedinteger, True), (lf.int32, lnp.integer, True), (lf.bool_, lnp.number, False),
    (lf.float32, np.float32, True), (lf.float32, lf.float16, False), (np.float32, lf.float32, True),
    (lf.bfloat16, lnp.floating, True), (lf.bfloat16, lnp.number, True), (lf.bfloat16, lnp.integer, False),
    (lf.bfloat16, lf.bfloat16, True), (lf.bfloat16, lf.float16, False),
])
def test_issubdtype(d, kind, want):
    assert lnp.issubdtype(d, kind) is want
    if lf.bfloat16 not in (d, kind):  # NumPy agrees wherever it knows the types
        assert np.issubdtype(np.dtype(d), kind if isinstance(kind, type) else np.dtype(kind)) is want


@pytest.mark.parametrize("d", [lf.float32, lf.float16, lf.int32, lf.bool_, np.int16])
@pytest.mark.parametrize("kind", ["bool", "signed integer", "unsigned integer", "integral", "real floating",
                                  "complex floating", "numeric", ("bool", "real floating"), np.float32])
def test_isdtype_is_numpys(d, kind):
    assert lnp.isdtype(d, kind) == np.isdtype(np.dtype(d), kind)


def test_isdtype_of_bfloat16_and_a_bad_kind():
    assert lnp.isdtype(lf.bfloat16, "real floating") and lnp.isdtype(lf.bfloat16, "numeric")
    assert not lnp.isdtype(lf.bfloat16, "integral")
    with pytest.raises(ValueError, match="isdtype: kind 'floats'"):
        lnp.isdtype(lf.float32, "floats")


def test_promote_types_and_can_cast_follow_the_lattice():
    # the lattice every binary op uses (JAX's: no float64 here)
    for a, b in [(lf.int32, lf.float16), (lf.float16, lf.bfloat16), (lf.bool_, lf.int32), (lf.float32, lf.bfloat16)]:
        x, y = lnp.zeros(2, dtype=a), lnp.zeros(2, dtype=b)
        assert lnp.promote_types(a, b) == (x + y).dtype
    assert lnp.promote_types(np.float16, "bfloat16") is lf.float32
    assert lnp.can_cast(lf.int32, lf.float32) and lnp.can_cast(lf.bool_, lf.int32)
    assert not lnp.can_cast(lf.float32, lf.int32) and not lnp.can_cast(lf.float16, lf.bfloat16)
    assert lnp.can_cast(lf.float32, lf.int32, casting="unsafe")
    assert lnp.can_cast(lf.float32, lf.float16, casting="same_kind")
    assert not lnp.can_cast(lf.float32, lf.int32, casting="same_kind")
    assert lnp.can_cast(lf.int32, np.int32, casting="no") and not lnp.can_cast(lf.int32, lf.float32, casting="no")
    with pytest.raises(ValueError, match="can_cast: casting must be one of"):
        lnp.can_cast(lf.int32, lf.float32, casting="kind")

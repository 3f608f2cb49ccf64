"""luminal_fn.numpy's differences, integrals, polynomials, covariance and axis editing
(diff, gradient, trapezoid, cross, polyval, vander, cov, corrcoef, append, insert, delete,
resize) against NumPy.

Cases are written as ``f(xp, *arrays)`` and run with ``xp=luminal_fn.numpy`` both inside
``lf.jit`` and eagerly. Float results are compared with NumPy computing on float64 copies of
the inputs; dtypes with NumPy's on the inputs themselves (float64 read as float32, int64 as int32).
"""
import warnings

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.frontend.errors import ArgumentError, DTypeError, IndexError_, ShapeError

from lnp_exact import _narrow, assert_same, check, make  # noqa: E402


def _wide(a):
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _compare(got, want, want_dtype, rtol, atol):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (type(got), len(want))
        for g, w, d in zip(got, want, want_dtype):
            _compare(g, w, d, rtol, atol)
        return
    g = np.asarray(got)
    assert g.shape == np.shape(want), f"shape {g.shape} != NumPy's {np.shape(want)}"
    assert g.dtype == _narrow(want_dtype).dtype, f"dtype {g.dtype} != NumPy's {_narrow(want_dtype).dtype}"
    np.testing.assert_allclose(g.astype(np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)


def close(f, *args, rtol=1e-5, atol=1e-6):
    """f under lf.jit and eagerly against NumPy (values from float64 copies of the inputs)."""
    want_dtype = f(np, *args)
    want = f(np, *[_wide(a) for a in args])
    _compare(lf.jit(lambda *a: f(lnp, *a))(*args), want, want_dtype, rtol, atol)
    _compare(f(lnp, *args), want, want_dtype, rtol, atol)


def exact(f, *args):
    """f under lf.jit (lnp_exact.check) and eagerly, equal to NumPy element for element."""
    check(f, *args)
    assert_same(f(lnp, *args), f(np, *args))


X = make((4, 5), np.float32, 1)
I = make((4, 5), np.int32, 2)
B = make((4, 5), np.bool_, 3)


# ---- diff and ediff1d ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16])
def test_diff_orders_axes_and_dtypes(dtype):
    a = make((3, 4, 5), dtype, 4)

    def f(xp, t):
        return (xp.diff(t), xp.diff(t, n=2, axis=0), xp.diff(t, axis=-2), xp.diff(t, n=0),
                xp.diff(t, n=6), xp.diff(t[0, 0], 3))

    if dtype == np.float16:  # higher orders round once in float32, NumPy after each order
        close(f, a, rtol=2e-3, atol=2e-3)
    else:
        exact(f, a)


def test_diff_prepend_and_append():
    exact(lambda xp, t: (xp.diff(t, prepend=0, append=t[:, :2]), xp.diff(t, axis=0, prepend=t[-1:]),
                         xp.diff(t, n=2, append=7)), I)
    exact(lambda xp, t: xp.diff(t, prepend=True, axis=0), B)
    exact(lambda xp, t: xp.diff(t, 1, 0, 2, -1), I)  # positional prepend and append
    close(lambda xp, t: (xp.diff(t, prepend=0.5), xp.diff(t, append=np.zeros((4, 1)))), X)
    close(lambda xp, t: xp.diff(t, prepend=0.5), I)  # int input, float prepend: float


def test_ediff1d():
    exact(lambda xp, t: (xp.ediff1d(t), xp.ediff1d(t, to_begin=[-1, -2]), xp.ediff1d(t, 9, 8),
                         xp.ediff1d(t, to_end=np.array([[1], [2]], np.int32))), I)
    close(lambda xp, t: xp.ediff1d(t, to_end=[1.5, 2], to_begin=3), X)


# ---- gradient ----------------------------------------------------------------------------------
def test_gradient_with_scalar_spacings():
    close(lambda xp, t: (xp.gradient(t), xp.gradient(t, 0.5), xp.gradient(t, 2.0, 0.25),
                         xp.gradient(t, axis=-1), xp.gradient(t, 3.0, axis=(1, 0), edge_order=2),
                         xp.gradient(t[1], edge_order=2)), X)
    got = lnp.gradient(X[0])
    assert not isinstance(got, tuple)
    np.testing.assert_allclose(np.asarray(got), np.gradient(X[0].astype(np.float64)), rtol=1e-5)


def test_gradient_with_coordinates():
    xs = np.array([0.0, 0.5, 1.75, 2.0])
    ys = np.array([-1.0, 0.0, 0.5, 2.5, 4.0], np.float32)
    even = np.arange(5, dtype=np.int32) * 3  # evenly spaced: NumPy's scalar formulas
    for order in (1, 2):
        close(lambda xp, t: (xp.gradient(t, xs, ys, edge_order=order),
                             xp.gradient(t, 0.5, even, edge_order=order)), X)
    # traced coordinates: the uneven-spacing weights are computed in the graph (float32)
    close(lambda xp, t, c: (xp.gradient(t, c, axis=1), xp.gradient(t, c, axis=-1, edge_order=2),
                            xp.gradient(t[0], c * 2)), X, ys, rtol=1e-4, atol=1e-5)


def test_gradient_dtypes():
    close(lambda xp, t: xp.gradient(t, 2), I)  # float32 for int input
    close(lambda xp, t: xp.gradient(t, axis=0, edge_order=2), make((3, 4), np.float16), rtol=2e-3, atol=2e-3)


# ---- trapezoid ---------------------------------------------------------------------------------
def test_trapezoid():
    xs = np.array([0.0, 0.5, 1.75, 2.0], np.float32)
    close(lambda xp, t: (xp.trapezoid(t), xp.trapezoid(t, axis=0), xp.trapezoid(t, dx=0.5, axis=-2),
                         xp.trapezoid(t, xs, axis=0), xp.trapezoid(t, x=t * t, axis=1),
                         xp.trapezoid(t[:, :1]), xp.trapezoid(t[0], dx=np.float32(2.0))), X)
    close(lambda xp, t: (xp.trapezoid(t), xp.trapezoid(t, x=np.arange(4), axis=0)), I)
    close(lambda xp, t: xp.trapezoid(t, axis=0), B)  # NumPy adds the bool pairs with "or"
    close(lambda xp, t: xp.trapezoid(t, dx=0.5), make((3, 6), np.float16), rtol=2e-3, atol=2e-3)


# ---- cross -------------------------------------------------------------------------------------
def test_cross_of_3_vectors():
    a, b = make((4, 3), np.float32, 5), make((2, 1, 3), np.float32, 6)
    close(lambda xp, p, q: (xp.cross(p, q), xp.cross(p[0], q), xp.cross(p.T, q, axisa=0),
                            xp.cross(p, q[0, 0], axisc=0), xp.cross(p.T, p.T, axis=0)), a, b)
    exact(lambda xp, p, q: xp.cross(p, q), make((5, 3), np.int32, 7), make((5, 3), np.bool_, 8))
    exact(lambda xp, p, q: xp.cross(p, q, axisa=-2, axisb=0, axisc=1),
          make((2, 3, 4), np.int32, 9), make((3, 4), np.int32, 10))


def _cross_padded(a, b, axisa=-1, axisb=-1, axisc=-1):
    """The reference for 2-component vectors (newer NumPy refuses them): NumPy 1's definition,
    the vectors padded with z = 0, and the z component alone when both have 2."""
    a, b = np.moveaxis(np.asarray(a), axisa, -1), np.moveaxis(np.asarray(b), axisb, -1)

    def pad(v):
        return np.concatenate([v, np.zeros(v.shape[:-1] + (1,), v.dtype)], -1) if v.shape[-1] == 2 else v

    c = np.cross(pad(a), pad(b))
    return c[..., 2] if a.shape[-1] == b.shape[-1] == 2 else np.moveaxis(c, -1, axisc)


def test_cross_of_2_vectors_warns_as_numpy():
    a, b, c = make((4, 2), np.float32, 11), make((4, 2), np.float32, 12), make((4, 3), np.int32, 13)
    with pytest.warns(DeprecationWarning, match="2-dimensional vectors"):
        lnp.cross(a, c)
    with pytest.warns(DeprecationWarning, match="2-dimensional vectors"):
        lf.jit(lambda p, q: lnp.cross(p, q))(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)

        def cases(xp, p, q, r):
            cr = _cross_padded if xp is np else xp.cross
            return cr(p, q), cr(p, r), cr(r, q), cr(p[0], q), cr(p, r.T, axisb=0, axisc=0)

        close(cases, a, b, c)
        assert_same(lnp.cross([1, 2], [3, 4]), np.int32(-2))


# ---- polynomials -------------------------------------------------------------------------------
def test_polyval():
    p = np.array([0.5, -2.0, 0.0, 3.0], np.float32)
    close(lambda xp, c, t: (xp.polyval(c, t), xp.polyval(c, 1.5), xp.polyval([1, 2], t),
                            xp.polyval(c[:1], t), xp.polyval(c[:, None], t)), p, X)  # 2-D p: rows broadcast, as NumPy
    exact(lambda xp, t: (xp.polyval([3, 0, -1], t), xp.polyval(np.array([2, 1], np.int32), 4)), I)
    exact(lambda xp, t: (xp.polyval([True, False, True], t), xp.polyval([2, 1], t)), B)
    special = np.array([np.inf, -np.inf, np.nan, 0.0], np.float32)
    with np.errstate(invalid="ignore"):
        close(lambda xp, c, t: xp.polyval(p=c, x=t), p, special)  # 0 * inf: nan, as NumPy


def test_vander():
    close(lambda xp, t: (xp.vander(t), xp.vander(t, 3), xp.vander(t, N=6, increasing=True),
                         xp.vander(t, 0), xp.vander(t, 1)), X[0])
    exact(lambda xp, t: (xp.vander(t), xp.vander(t, 3, True)), I[0])
    exact(lambda xp, t: xp.vander(t, 4), B[0])


# ---- statistics --------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_cov_and_corrcoef():
    y = make((2, 5), np.float32, 14)
    close(lambda xp, t, u: (xp.cov(t), xp.cov(t, u), xp.cov(t.T, rowvar=False), xp.cov(t, bias=True),
                            xp.cov(t, ddof=2), xp.cov(t[0]), xp.cov(t[0], u[0]), xp.cov(t[:1, :2], ddof=2),
                            xp.cov(t.T, u.T, rowvar=False, bias=True),
                            xp.corrcoef(t), xp.corrcoef(t, u), xp.corrcoef(t.T, rowvar=False),
                            xp.corrcoef(t[0], u[1])), X, y, rtol=1e-4, atol=1e-5)
    close(lambda xp, t: (xp.cov(t), xp.corrcoef(t)), I, rtol=1e-4, atol=1e-5)
    close(lambda xp, t: (xp.cov(m=t, rowvar=False), xp.corrcoef(x=t[1:], y=t[:1])), B, rtol=1e-4, atol=1e-5)


def test_cov_weights():
    fw, aw = np.array([1, 2, 0, 3, 1]), np.array([0.5, 1.0, 2.0, 1.0, 0.25], np.float32)
    close(lambda xp, t, a: (xp.cov(t, fweights=fw), xp.cov(t, aweights=a), xp.cov(t, fweights=fw, aweights=a),
                            xp.cov(t, aweights=a, ddof=0), xp.cov(t, fweights=fw, ddof=3),
                            xp.cov(t.T, rowvar=False, aweights=a, bias=True)), X, aw, rtol=1e-4, atol=1e-5)


# ---- append, insert, delete, resize ----------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_append(dtype):
    a = make((3, 4), dtype, 15)
    exact(lambda xp, t: (xp.append(t, t[:1], axis=0), xp.append(t, t[:, ::-1], axis=-1), xp.append(t, t[0]),
                         xp.append(t[0], t), xp.append(t, [])), a)
    close(lambda xp, t: xp.append(t, [0.5, 1]), I)  # int with floats: float


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_insert(dtype):
    a = make((3, 4), dtype, 16)
    v = make((3,), dtype, 17)
    exact(lambda xp, t, u: (xp.insert(t, 1, u, axis=1), xp.insert(t, [1], u[:, None], axis=1),
                            xp.insert(t, -1, t[0], axis=0), xp.insert(t, 4, u[0], axis=-1),
                            xp.insert(t, [3, 0, 0, 4], u[0], axis=1), xp.insert(t, [0, 2], t[:2], axis=0),
                            xp.insert(t, slice(None, None, 2), u[:1], axis=1), xp.insert(t, 5, u),
                            xp.insert(t, [2, -3, 12], u), xp.insert(t, [], u[0], axis=0),
                            xp.insert(t, obj=1, values=t[1], axis=-2)), a, v)


def test_insert_casts_values_to_the_array_dtype():
    exact(lambda xp, t: (xp.insert(t, [1, 3], [2.7, -2.7], axis=1), xp.insert(t, 0, 7.5)), I)
    exact(lambda xp, t: xp.insert(t, np.array([True, False, False, True, False]), [5, 0], axis=1), B)


def test_delete():
    many = [0, 2, 3, 5, 7, 11, 13, 14, 17, 19, -1]  # scattered: one gather
    x = make((20, 3), np.float32, 18)
    exact(lambda xp, t: (xp.delete(t, 0, axis=0), xp.delete(t, -1, axis=1), xp.delete(t, [1, 1, 7], axis=0),
                         xp.delete(t, slice(None, None, 2), axis=0), xp.delete(t, slice(-1, 2, -3), axis=0),
                         xp.delete(t, many, axis=0), xp.delete(t, many), xp.delete(t, np.int32(4)),
                         xp.delete(t, [], axis=1), xp.delete(t, np.arange(20) % 3 == 0, axis=0),
                         xp.delete(t, slice(5, 1), axis=0), xp.delete(arr=t, obj=[0, 1], axis=-1)), x)
    exact(lambda xp, t: (xp.delete(t, [0, 2], axis=1), xp.delete(t, 3)), B)
    exact(lambda xp, t: xp.insert(t, many, t[:len(many)], axis=0), x)


def test_resize():
    for dtype in (np.float32, np.int32, np.bool_):
        a = make((2, 3), dtype, 19)
        exact(lambda xp, t: (xp.resize(t, (3, 5)), xp.resize(t, 4), xp.resize(t, (2, 0)), xp.resize(t[:0], (2, 2)),
                             xp.resize(t, (1, 6)), xp.resize(t, new_shape=[13])), a)


# ---- dynamic axes ------------------------------------------------------------------------------
def test_along_a_dynamic_axis_one_trace():
    """diff, ediff1d, trapezoid, polyval, append, and insert and delete off the dynamic axis:
    one trace serves every length, an empty axis included."""
    f = lf.jit(lambda a, x: (lnp.diff(a, axis=0), lnp.diff(a, n=2, axis=0, prepend=1.0),
                             lnp.ediff1d(x, to_begin=2), lnp.trapezoid(a, axis=0), lnp.trapezoid(a[:, 0], x),
                             lnp.polyval([1.0, -2.0, 0.5], x), lnp.append(x, x), lnp.insert(a, 1, 0.0, axis=1),
                             lnp.delete(a, 0, axis=1)),
               dynamic_axes={"a": {0: "s"}, "x": {0: "s"}})
    r = np.random.default_rng(20)
    for n in (3, 1, 6, 0):
        a, x = r.standard_normal((n, 2)).astype(np.float32), np.sort(r.random(n)).astype(np.float32)
        want = (np.diff(a, axis=0), np.diff(a, n=2, axis=0, prepend=1.0), np.ediff1d(x, to_begin=2),
                np.trapezoid(a, axis=0), np.trapezoid(a[:, 0], x), np.polyval([1.0, -2.0, 0.5], x),
                np.append(x, x), np.insert(a, 1, 0.0, axis=1), np.delete(a, 0, axis=1))
        for k, (g, w) in enumerate(zip(f(a, x), want)):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == _narrow(w).dtype, (n, k, g.shape, w.shape, g.dtype)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"length {n}, result {k}")
    assert f.trace_count == 1


def test_gradient_and_cov_along_a_dynamic_axis():
    f = lf.jit(lambda a, x: (lnp.gradient(a, axis=0, edge_order=2), lnp.gradient(a, x, 0.5),
                             lnp.cov(a, rowvar=False), lnp.corrcoef(a.T), lnp.cov(a.T, aweights=x)),
               dynamic_axes={"a": {0: "s"}, "x": {0: "s"}})
    r = np.random.default_rng(21)
    for n in (3, 7, 4):
        a = r.standard_normal((n, 3)).astype(np.float32)
        x = (np.cumsum(r.random(n)) + 0.5).astype(np.float32)
        wa, wx = a.astype(np.float64), x.astype(np.float64)
        want = (np.gradient(wa, axis=0, edge_order=2), np.gradient(wa, wx, 0.5), np.cov(wa, rowvar=False),
                np.corrcoef(wa.T), np.cov(wa.T, aweights=wx))
        _compare(f(a, x), want, want, rtol=1e-4, atol=1e-5)
    assert f.trace_count == 1
    with pytest.raises(ShapeError, match=r"gradient along the dynamic axis 0 needs at least 3 elements.*s=2"):
        f(a[:2], x[:2])


# ---- errors ------------------------------------------------------------------------------------
def test_errors_name_the_function_and_the_problem():
    with pytest.raises(ShapeError, match="diff: needs an array of at least one dimension"):
        lnp.diff(np.float32(1.0))
    with pytest.raises(ShapeError, match="diff: the order n must be non-negative"):
        lnp.diff(X, n=-1)
    with pytest.raises(ShapeError, match="diff: axis 2 is out of bounds"):
        lf.jit(lambda t: lnp.diff(t, axis=2))(X)
    with pytest.raises(ShapeError, match=r"diff: prepend of shape \(2, 2\) does not fit a of shape \(4, 5\)"):
        lnp.diff(X, prepend=np.ones((2, 2), np.float32))
    with pytest.raises(DTypeError, match="ediff1d: bool"):
        lnp.ediff1d(B)
    with pytest.raises(DTypeError, match="ediff1d: dtype of to_begin .* same_kind"):
        lnp.ediff1d(I, to_begin=0.5)
    with pytest.raises(ShapeError, match=r"gradient: axis 0 of shape \(2, 5\) is too small for edge_order=2"):
        lnp.gradient(X[:2], edge_order=2)
    with pytest.raises(ShapeError, match="gradient: edge_order must be 1 or 2"):
        lnp.gradient(X, edge_order=3)
    with pytest.raises(ArgumentError, match="gradient: got 3 spacings for 2 axes"):
        lnp.gradient(X, 1.0, 2.0, 3.0)
    with pytest.raises(ShapeError, match=r"gradient: the coordinates of shape \(3,\) for axis 0"):
        lnp.gradient(X, [1.0, 2.0, 3.0], 1.0)
    with pytest.raises(DTypeError, match="gradient: bool"):
        lnp.gradient(B)
    with pytest.raises(ShapeError, match=r"trapezoid: x of shape \(3,\) must have the length of axis 1"):
        lnp.trapezoid(X, x=[1.0, 2.0, 3.0])
    with pytest.raises(ShapeError, match="cross: incompatible dimensions .* 5 and 5 components"):
        lnp.cross(X, X)
    with pytest.raises(ShapeError, match="cross .*batch shapes.*cannot be broadcast"):
        lnp.cross(X[:, :3], X[:2, :3])
    with pytest.raises(ShapeError, match=r"cross \(axisc\): axis 2 is out of bounds"):
        lnp.cross(X[:, :3], X[:, 1:4], axisc=2)
    with pytest.raises(DTypeError, match="cross: bool"):
        lnp.cross(B[:, :3], B[:, :3])
    with pytest.raises(ShapeError, match="polyval: p must be a 1-D sequence"):
        lnp.polyval(2.0, X)
    with pytest.raises(ShapeError, match="vander: x must be one-dimensional"):
        lnp.vander(X)
    with pytest.raises(ShapeError, match="cov: m has more than 2 dimensions"):
        lnp.cov(np.ones((2, 2, 2), np.float32))
    with pytest.raises(ShapeError, match="cov: m has 5 observations but y has 2"):
        lnp.cov(X, X[:, :2])
    with pytest.raises(ShapeError, match="cov: fweights cannot be negative"):
        lnp.cov(X, fweights=[1, -1, 2, 1, 1])
    with pytest.raises(DTypeError, match="cov: fweights must be integers"):
        lnp.cov(X, fweights=[1, 1.5, 2, 1, 1])
    with pytest.raises(ShapeError, match=r"cov: aweights must be 1-D with one weight per observation \(5\)"):
        lnp.cov(X, aweights=[1.0, 2.0])
    with pytest.raises(ArgumentError, match="cov: ddof must be an int"):
        lnp.cov(X, ddof=0.5)
    with pytest.raises(ShapeError, match=r"append: values of shape \(2,\) do not fit arr of shape \(4, 5\)"):
        lnp.append(X, [1.0, 2.0], axis=0)
    with pytest.raises(IndexError_, match="insert: index 6 is out of bounds for axis 1 with size 5"):
        lnp.insert(X, 6, 1.0, axis=1)
    with pytest.raises(IndexError_, match="delete: index -6 is out of bounds for axis 1 with size 5"):
        lnp.delete(X, [0, -6], axis=1)
    with pytest.raises(IndexError_, match="insert: obj must hold integers"):
        lnp.insert(X, [1.5], 1.0)
    with pytest.raises(ShapeError, match=r"insert \(values.*cannot broadcast shape \(3,\)"):
        lnp.insert(X, [1, 2], [1.0, 2.0, 3.0], axis=1)
    with pytest.raises(ShapeError, match="delete: a boolean obj must be 1-D with the axis length 5"):
        lnp.delete(X, [True, False], axis=1)
    with pytest.raises(ShapeError, match="resize: all elements of new_shape must be non-negative"):
        lnp.resize(X, (-1, 2))


def test_traced_or_dynamic_arguments_that_must_be_static():
    for fn in ("insert", "delete"):
        with pytest.raises(IndexError_, match=fr"{fn}: obj must be static .* \(static_argnums"):
            lf.jit(lambda t, o: getattr(lnp, fn)(t, o, *([1.0] if fn == "insert" else [])))(X, np.int32(1))
    # a static obj works as a static argument
    g = lf.jit(lambda t, o: lnp.delete(t, o, axis=1), static_argnums=1)
    assert_same(g(X, (0, 3)), np.delete(X, (0, 3), axis=1))
    dyn = {"t": {0: "s"}}
    with pytest.raises(ShapeError, match="insert: the length of the edited axis 0 must be static.*symbolic dim s"):
        lf.jit(lambda t: lnp.insert(t, 1, 0.0, axis=0), dynamic_axes=dyn)(X)
    with pytest.raises(ShapeError, match="polyval: the number of coefficients must be static"):
        lf.jit(lambda t: lnp.polyval(t, 2.0), dynamic_axes=dyn)(X[:, 0])
    with pytest.raises(ShapeError, match="resize: the size of a must be static"):
        lf.jit(lambda t: lnp.resize(t, 7), dynamic_axes=dyn)(X)
    with pytest.raises(ShapeError, match="resize: new_shape must be static"):
        lf.jit(lambda t, n: lnp.resize(t, n))(X, np.int32(3))
    # a dynamic new_shape is fine: the data is read cyclically
    r = lf.jit(lambda t, u: lnp.resize(t, (u.shape[0], 3)), dynamic_axes={"u": {0: "s"}})
    for n in (1, 4, 0):
        assert_same(r(X[:2, :2], np.zeros(n, np.float32)), np.resize(X[:2, :2], (n, 3)))
    assert r.trace_count == 1

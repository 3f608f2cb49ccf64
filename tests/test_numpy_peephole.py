"""The NumPy backend's tree rewrites: exp / log / tanh / abs / rint ... as luminal_fn.numpy writes
them become one NumPy call; anything else is left alone; values still match NumPy. Trees are
read from the plan the backend runs (after tree_merge and plan_share)."""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy.tree_peephole import rewrite
from luminal_fn.ir.llir import LOG2E


def _trees(fn, *args):
    jf = lf.jit(fn, backend="numpy", search=lf.SearchOptions(limit=1, cache=False))
    out = np.asarray(jf(*args))
    (compiled,) = jf.compiled()
    (plan,) = compiled.runner.plans.values()
    return out, [rewrite(n.attrs["expr"]) for n in plan.executable.plan.nodes
                 if n.op == "CustomOp" and n.attrs.get("name") in ("fused", "fused_reduce")]


X = np.linspace(-4, 4, 24, dtype=np.float32).reshape(4, 6)


@pytest.mark.parametrize("name, fn, ref", [
    ("np.tanh", lnp.tanh, np.tanh),
    ("np.exp", lnp.exp, np.exp),
    ("np.log", lambda a: lnp.log(a * a + 1.0), lambda a: np.log(a * a + 1)),
])
def test_whole_functions_are_recognised(name, fn, ref):
    out, trees = _trees(fn, X)
    assert any(name in str(t) for t in trees), trees
    np.testing.assert_allclose(out, ref(X.astype(np.float64)), rtol=2e-6, atol=1e-6)


def test_near_misses_are_left_alone():
    # exp2 of x * 1.5 is not an exp; 1 - 3 / (exp(2x) + 1) is not a tanh
    t = ("Exp2", "float32", ("Mul", "float32", ("in", 0), ("const", 1.5, "float32")))
    assert rewrite(t) == t
    e = ("Exp2", "float32", ("Mul", "float32", ("in", 0), ("const", LOG2E, "float32")))
    near_tanh = ("Add", "float32", ("const", 1.0, "float32"),
                 ("Mul", "float32", ("Mul", "float32", ("const", 3.0, "float32"),
                                     ("Recip", "float32", ("Add", "float32", e, ("const", 1.0, "float32")))),
                  ("const", -1.0, "float32")))
    out = rewrite(near_tanh)
    assert "np.tanh" not in str(out) and "np.exp" in str(out)  # the exp inside is still an exp
    gelu, _ = _trees(lambda u: 0.5 * u * (1.0 + lnp.tanh(0.8 * (u + 0.044715 * u * u * u))), X)
    u = X.astype(np.float64)
    np.testing.assert_allclose(gelu, 0.5 * u * (1 + np.tanh(0.8 * (u + 0.044715 * u ** 3))), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["tanh", "expm1", "cos"])
def test_a_select_of_two_forms_of_one_function_is_that_numpy_function(name):
    """lnp.tanh and lnp.expm1 select a Taylor series near 0 (their exp forms cancel there),
    lnp.cos a half-angle or a double-angle form; on the NumPy backend each whole select is one
    NumPy call, and no select is left in its kernel."""
    out, trees = _trees(getattr(lnp, name), X)
    assert any(t[0] == "np." + name for t in trees), trees
    assert not any("Select" in str(t) for t in trees), trees
    np.testing.assert_allclose(out, getattr(np, name)(X), rtol=1e-7, atol=0)


def test_a_select_between_tanh_and_another_series_is_kept():
    """The select folds only when its other branch is tanh's own series of the same x."""
    x, e = ("in", 0), ("Exp2", "float32", ("Mul", "float32", ("Mul", "float32", ("in", 0), ("const", 2.0, "float32")),
                                           ("const", LOG2E, "float32")))
    tanh_form = ("Add", "float32", ("const", 1.0, "float32"),
                 ("Mul", "float32", ("Mul", "float32", ("const", 2.0, "float32"),
                                     ("Recip", "float32", ("Add", "float32", e, ("const", 1.0, "float32")))),
                  ("const", -1.0, "float32")))
    z = ("Mul", "float32", x, x)
    c = ("LessThan", "bool", z, ("const", 0.09, "float32"))

    def series(coefs):
        p = ("const", coefs[-1], "float32")
        for k in reversed(coefs[:-1]):
            p = ("Add", "float32", ("const", k, "float32"), ("Mul", "float32", z, p))
        return ("Mul", "float32", x, ("Add", "float32", ("const", 1.0, "float32"), ("Mul", "float32", z, p)))

    real = (-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925)
    assert rewrite(("Select", "float32", c, series(real), tanh_form)) == ("np.tanh", "float32", x)
    other = ("Select", "float32", c, series((-1 / 3, 2 / 15, -17 / 315, 62 / 2835, 0.5)), tanh_form)
    assert rewrite(other)[0] == "Select"
    other_x = ("Select", "float32", c, series(real), ("np.tanh", "float32", ("in", 1)))
    assert rewrite(other_x)[0] == "Select"


EDGES = np.array([-2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 8388607.5, -8388609.0, 3e38, -3e38,
                  np.inf, -np.inf, np.nan, 1e-45, -1e-45], np.float32)
EDGES = np.stack([EDGES, -EDGES])  # (2-d: the first genome of a 1-d where is its gather form)


@pytest.mark.parametrize("name", ["trunc", "floor", "fix"])
def test_trunc_and_floor_are_numpys_own_with_the_sign_of_zero(name):
    """lnp.trunc's where(x * x < 2^46, x - fmod(x, 1), x) and lnp.floor's trunc(x) - (x < trunc(x))
    are one NumPy call each on this backend (fmod alone takes 15 ns an element; floor is one call
    where trunc shares its kernel), bit for bit NumPy's, -0.0 from trunc(-0.5) included."""
    out, trees = _trees(getattr(lnp, name), EDGES)
    assert any("np.trunc" in str(t) or "np.floor" in str(t) for t in trees), trees
    assert not any("Mod" in str(t) for t in trees), trees
    ref = getattr(np, name)(EDGES)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(ref))


def _max_ref(x, y):  # the front end's maximum: x unless x < y or y is NaN (ties keep x)
    return np.where((x < y) | np.isnan(y), y, x)


def _min_ref(x, y):
    return np.where((y < x) | np.isnan(y), y, x)


@pytest.mark.parametrize("fn, ref, calls", [
    (lambda x, y: lnp.maximum(x, y), _max_ref, ["np.maximum"]),
    (lambda x, y: lnp.minimum(y, x), lambda x, y: _min_ref(y, x), ["np.minimum"]),
    (lambda x, y: lf.nn.relu(x), lambda x, y: _max_ref(x, np.float32(0.0)), ["np.maximum"]),
    (lambda x, y: lnp.maximum(x, -0.0), lambda x, y: _max_ref(x, np.float32(-0.0)), ["np.maximum"]),
    (lambda x, y: lnp.clip(x, -1.0, 2.5), lambda x, y: _min_ref(_max_ref(x, np.float32(-1)), np.float32(2.5)),
     ["np.minimum", "np.maximum"]),
])
def test_maximum_and_minimum_are_numpys_own_with_the_selects_ties(fn, ref, calls):
    """maximum / minimum / clip / relu are one NumPy call each, NaN from either side, and a tie
    (+0.0 against -0.0) keeps x as the select (and the other backends) do: on every pairing of
    the edge values."""
    x = np.repeat(EDGES.reshape(-1), EDGES.size).reshape(-1, 2 * EDGES.shape[1])
    y = np.tile(EDGES.reshape(-1), EDGES.size).reshape(x.shape)
    out, trees = _trees(fn, x, y)
    assert not any("Select" in str(t) for t in trees), trees
    assert all(c in str(trees) for c in calls), trees
    want = ref(x, y)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))


def test_maximum_with_another_condition_is_kept():
    x, y = ("in", 0), ("in", 1)
    nan_y = ("Mul", "bool", ("np.not", "bool", ("LessThan", "bool", y, ("const", np.inf, "float32"))),
             ("np.not", "bool", ("LessThan", "bool", ("const", -np.inf, "float32"), y)))
    take_y = ("Add", "bool", ("LessThan", "bool", x, y), nan_y)
    assert rewrite(("Select", "float32", take_y, y, x))[0] == "np.maximum"
    for near in (("Select", "float32", ("LessThan", "bool", x, y), y, x),  # y may be NaN
                 ("Select", "float32", take_y, x, y),
                 ("Select", "float32", ("Add", "bool", ("LessThan", "bool", x, y), ("LessThan", "bool", y, x)), y, x),
                 ("Select", "float32", ("LessThan", "bool", x, ("const", np.nan, "float32")),
                  ("const", np.nan, "float32"), x)):
        assert rewrite(near)[0] == "Select", near


def test_floor_in_one_kernel_is_np_floor():
    x = ("in", 0)
    t = ("np.trunc", "float32", x)
    below = ("Add", "float32", t, ("const", -1.0, "float32"))
    tree = ("Select", "float32", ("LessThan", "bool", x, t), below, t)
    assert rewrite(tree) == ("np.floor", "float32", x)
    above = ("Add", "float32", t, ("const", 1.0, "float32"))
    for other in (("Select", "float32", ("LessThan", "bool", t, x), below, t),  # these are not floor
                  ("Select", "float32", ("LessThan", "bool", x, t), t, below),
                  ("Select", "float32", ("LessThan", "bool", x, t), above, t)):
        assert rewrite(other) == other


def test_logic_in_int32_becomes_boolean_ops():
    """The front end writes not / and / or through int32 casts; the rewrite reads them as one
    boolean NumPy operation each, a select on a negated condition as the swapped select."""
    b0, b1 = ("in", 0), ("in", 1)
    cast = lambda b: ("Cast", "int32", b)  # noqa: E731
    lt0, lt1 = ("LessThan", "bool", b0, ("const", 0.0, "float32")), ("LessThan", "bool", b1, b0)
    not_ = ("LessThan", "bool", cast(lt0), ("const", 1, "int32"))
    assert rewrite(not_) == ("np.not", "bool", lt0)
    assert rewrite(("LessThan", "bool", cast(not_), ("const", 1, "int32"))) == lt0
    and_ = ("Cast", "bool", ("Mul", "int32", cast(lt0), cast(lt1)))
    assert rewrite(and_) == ("Mul", "bool", lt0, lt1)
    or_ = ("LessThan", "bool", ("const", 0, "int32"), ("Add", "int32", cast(lt0), cast(lt1)))
    assert rewrite(or_) == ("Add", "bool", lt0, lt1)
    sel = ("Select", "float32", not_, b0, b1)
    assert rewrite(sel) == ("Select", "float32", lt0, b1, b0)
    # an int32 sum that is not of two bools is left alone
    plain = ("LessThan", "bool", ("const", 0, "int32"), ("Add", "int32", ("in", 2), cast(lt0)))
    assert rewrite(plain) == plain


@pytest.mark.parametrize("fn, ref", [
    (lambda a: lnp.where(lnp.logical_and(a > 0, lnp.logical_not(a > 2)), a, -a),
     lambda a: np.where((a > 0) & ~(a > 2), a, -a)),
    (lambda a: lnp.logical_or(lnp.isnan(a), lnp.equal(a, 0.5)), lambda a: np.isnan(a) | (a == 0.5)),
    (lambda a: lnp.fmod(a, 2.0) + lnp.fmod(a, 1.0), lambda a: np.fmod(a, np.float32(2)) + np.fmod(a, np.float32(1))),
    (lambda a: lnp.fmod(a, 0.75), lambda a: np.fmod(a, np.float32(0.75))),
    (lnp.abs, np.abs), (lnp.ceil, np.ceil), (lnp.round, np.round),
])
def test_logic_selects_and_fmod_match_numpy_at_the_edges(fn, ref):
    out, _ = _trees(fn, EDGES)
    with np.errstate(all="ignore"):
        want = ref(EDGES)
    np.testing.assert_array_equal(out, want)
    if want.dtype.kind == "f":
        zero = want == 0
        np.testing.assert_array_equal(np.signbit(out[zero]), np.signbit(want[zero]))


@pytest.mark.parametrize("fn, ref, call", [
    (lnp.abs, np.abs, "np.abs"),
    (lnp.round, np.round, "np.rint"),
    (lnp.rint, np.rint, "np.rint"),
    (lambda a: lnp.around(a, 1), lambda a: np.around(a, 1), "np.rint"),
])
def test_abs_and_rint_are_numpys_own_across_their_kernels(fn, ref, call):
    """abs is where(x == 0, 0.0, where(x < 0, -x, x)) and rint three selects: each select is a
    kernel of its own, and tree_merge writes them into one tree, which is one NumPy call, bit
    for bit NumPy's (-0.0 from rint(-0.3), +0.0 from abs(-0.0), ties to even)."""
    x = np.concatenate([EDGES, np.float32([[-0.3, 0.3, 0.49999997, 4.5, -4.5, 123456.5, 2.0 ** 23 + 1,
                                            -0.7, 0.25, -1e-45, 7.0, 5.5, -5.5, 1e-40, 0.5, 3.5, -3.5],
                                           [-0.05, 0.05, 0.15, 0.25, 0.35, -0.25, 1e30, -1e30, 6.5,
                                            2.5, -6.5, 0.45, 0.55, 1.05, -1.05, 2.675, -2.675]])])
    out, trees = _trees(fn, x)
    assert any(call in str(t) for t in trees) and not any("Select" in str(t) for t in trees), trees
    want = ref(x)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))


def test_int_abs_is_np_abs():
    x = np.array([[0, -3, 5, -(2 ** 31), 2 ** 31 - 1, -1]], np.int32)
    out, trees = _trees(lnp.abs, x)
    assert any(t[0] == "np.abs" for t in trees), trees
    np.testing.assert_array_equal(out, np.abs(x))  # abs(INT_MIN) wraps to INT_MIN in both


def test_abs_and_rint_near_misses_are_left_alone():
    x = ("in", 0)
    neg = ("Mul", "float32", x, ("const", -1.0, "float32"))
    below = ("LessThan", "bool", x, ("const", 0.0, "float32"))
    zero_test = ("Mul", "bool", ("np.not", "bool", ("Add", "bool", below,
                                                    ("LessThan", "bool", ("const", 0.0, "float32"), x))),
                 ("LessThan", "bool", x, ("const", np.inf, "float32")))
    inner = ("Select", "float32", below, neg, x)
    assert rewrite(("Select", "float32", zero_test, ("const", 0.0, "float32"), inner))[0] == "np.abs"
    for near in (inner,  # where(x < 0, -x, x) alone keeps -0.0: not abs for floats
                 ("Select", "float32", zero_test, ("const", -0.0, "float32"), inner),
                 ("Select", "float32", zero_test, ("const", 1.0, "float32"), inner),
                 ("Select", "float32", zero_test[2], ("const", 0.0, "float32"), inner),  # NaN test dropped
                 ("Select", "float32", zero_test, ("const", 0.0, "float32"), ("Select", "float32", below, x, neg)),
                 ("Select", "float32", zero_test, ("const", 0.0, "float32"),
                  ("Select", "float32", below, ("Mul", "float32", x, ("const", -2.0, "float32")), x))):
        assert rewrite(near)[0] == "Select", near
    assert rewrite(("Select", "int32", ("LessThan", "bool", ("in", 0), ("const", 0, "int32")),
                    ("Mul", "int32", ("in", 0), ("const", -1, "int32")), ("in", 0)))[0] == "np.abs"
    assert rewrite(("Select", "int32", ("LessThan", "bool", ("in", 0), ("const", 1, "int32")),
                    ("Mul", "int32", ("in", 0), ("const", -1, "int32")), ("in", 0)))[0] == "Select"


def test_a_rint_of_another_bump_is_kept():
    """floor(x) + (x - floor(x) > 0.5), rounding ties down, is not rint: only the whole form is."""
    def round_half_down(a):
        f = lnp.floor(a)
        r = f + (a - f > 0.5).astype(lnp.float32)
        return lnp.where(r == 0, a * 0.0, r)

    x = np.float32([[0.5, 1.5, 2.5, -0.5, -1.5, 0.7, -0.7, 3.2]])
    out, trees = _trees(round_half_down, x)
    assert not any("np.rint" in str(t) for t in trees), trees
    f = np.floor(x)
    np.testing.assert_array_equal(out, f + (x - f > 0.5))


@pytest.mark.parametrize("name", ["cosh", "sinh"])
def test_cosh_and_sinh_are_numpys_own(name):
    """cosh is where(|x| > 88, exp(|x|/2) / 2 * exp(|x|/2), (e + 1/e) / 2), sinh its expm1 form
    with copysign's select for the sign: once merged, one NumPy call each, NumPy's bits
    (sinh(-0.0) is -0.0)."""
    x = np.concatenate([EDGES, np.float32([[-0.0, 1e-7, -1e-7, 0.3, -0.3, 20.0, -20.0, 88.5, -88.5, 89.0,
                                            89.5, -89.5, 1.0, -1.0, 5.0, 1e-30, -1e-30]])])
    out, trees = _trees(getattr(lnp, name), x)
    assert any(t[0] == "np." + name for t in trees) and not any("Select" in str(t) for t in trees), trees
    with np.errstate(over="ignore"):
        want = getattr(np, name)(x)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))


def test_near_forms_of_cosh_and_sinh_are_kept():
    """Another threshold, another small branch, swapped branches, or sinh's magnitude signed by
    x < 0 alone (sinh(-0.0) would be +0.0) are not NumPy's cosh / sinh."""
    a = ("np.abs", "float32", ("in", 0))
    h = ("np.exp", "float32", ("Mul", "float32", a, ("const", 0.5, "float32")))
    big = ("Mul", "float32", ("Mul", "float32", h, ("const", 0.5, "float32")), h)
    e = ("np.exp", "float32", a)
    small = ("Mul", "float32", ("Add", "float32", e, ("Recip", "float32", e)), ("const", 0.5, "float32"))
    cosh = ("Select", "float32", ("LessThan", "bool", ("const", 88.0, "float32"), a), big, small)
    assert rewrite(cosh)[0] == "np.cosh"
    sinh_like = ("Mul", "float32",
                 ("Add", "float32", e, ("Mul", "float32", ("Recip", "float32", e), ("const", -1.0, "float32"))),
                 ("const", 0.5, "float32"))
    for near in (("Select", "float32", ("LessThan", "bool", ("const", 80.0, "float32"), a), big, small),
                 ("Select", "float32", ("LessThan", "bool", ("const", 88.0, "float32"), a), big, sinh_like),
                 ("Select", "float32", ("LessThan", "bool", ("const", 88.0, "float32"), a), small, big)):
        assert rewrite(near)[0] == "Select", near
    em1 = ("np.expm1", "float32", a)
    r = ("Select", "float32", ("LessThan", "bool", ("const", 88.0, "float32"), a), big,
         ("Mul", "float32", ("Add", "float32", em1,
                             ("Mul", "float32", em1, ("Recip", "float32", ("Add", "float32", em1, ("const", 1.0, "float32"))))),
          ("const", 0.5, "float32")))
    mag = ("np.abs", "float32", r)
    neg = ("Mul", "float32", mag, ("const", -1.0, "float32"))
    x = ("in", 0)
    below = ("LessThan", "bool", x, ("const", 0.0, "float32"))
    zero = ("Mul", "bool", ("np.not", "bool", ("Add", "bool", below, ("LessThan", "bool", ("const", 0.0, "float32"), x))),
            ("LessThan", "bool", x, ("const", np.inf, "float32")))
    recip_below = ("LessThan", "bool", ("Recip", "float32", x), ("const", 0.0, "float32"))
    signbit = ("Add", "bool", below, ("Mul", "bool", zero, recip_below))
    assert rewrite(("Select", "float32", signbit, neg, mag))[0] == "np.sinh"
    assert rewrite(("Select", "float32", below, neg, mag))[0] == "Select"
    assert rewrite(("Select", "float32", signbit, mag, neg))[0] == "Select"


@pytest.mark.parametrize("name", ["trunc", "floor", "ceil", "fix", "rint", "absolute", "sinh", "cosh", "tanh",
                                  "expm1", "cos", "exp", "log", "arctan", "arcsinh", "sign", "cbrt", "tan", "log1p"])
def test_no_searched_candidate_raises_in_the_peephole(name):
    """The matchers see every tree a genome can hand them (a select's branch may be a bare
    input): the search times forty genomes, none raises, and the pick is NumPy's value."""
    x = np.concatenate([EDGES.reshape(-1), X.reshape(-1)]).astype(np.float32)
    jf = lf.jit(getattr(lnp, name), backend="numpy", search=lf.SearchOptions(limit=40, cache=False))
    with np.errstate(all="ignore"):
        got, want = np.asarray(jf(x)), getattr(np, name)(x)
    text = jf.compiled()[0].as_text()
    assert " 0 raised" in text, text.splitlines()[:3]
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)

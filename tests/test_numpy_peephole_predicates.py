"""The NumPy backend's float tests (backends/numpy/peephole_predicates.py): lnp.isnan, isinf,
isfinite and signbit become one NumPy call each, alone and inside other trees, once no whole
function has taken them; their values are NumPy's; near forms are kept."""
import math

import numpy as np
import pytest

import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy.tree_peephole import rewrite
from test_numpy_peephole import EDGES, _trees

F32 = np.float32
X = np.concatenate([EDGES.reshape(-1), F32([-0.0, 0.0, 1e-45, -1e-45, 1e-38, np.inf, -np.inf, np.nan, 3.4028235e38,
                                            -3.4028235e38, 2.0, -2.0])]).reshape(2, -1)
NAMES = ["isnan", "isinf", "isfinite", "signbit"]


@pytest.mark.parametrize("name", NAMES)
def test_float_tests_are_numpys_own(name):
    out, trees = _trees(getattr(lnp, name), X)
    assert trees == [("np." + name, "bool", ("in", 0))], trees
    np.testing.assert_array_equal(out, getattr(np, name)(X))
    assert out.dtype == np.bool_


def test_tests_inside_other_trees_and_whole_functions_that_read_them():
    """where(isnan(x), 0, x) reads np.isnan; isposinf is np.isinf and a comparison; sign and
    copysign, whose whole forms contain a NaN test and a signbit, are still NumPy's own calls."""
    out, trees = _trees(lambda v: lnp.where(lnp.isnan(v), 0.0, v), X)
    assert any("np.isnan" in str(t) for t in trees) and "np.not" not in str(trees), trees
    np.testing.assert_array_equal(out, np.where(np.isnan(X), F32(0), X))
    out, trees = _trees(lnp.isposinf, X)
    assert "np.isinf" in str(trees), trees
    np.testing.assert_array_equal(out, np.isposinf(X))
    out, trees = _trees(lnp.sign, X)
    assert [t[0] for t in trees] == ["np.sign"], trees
    out, trees = _trees(lnp.sinh, X)
    assert [t[0] for t in trees] == ["np.sinh"], trees


def test_half_precision_inputs_take_the_node_by_node_path():
    """A float16 input leaves the straight-line program (half precision): the evaluator runs
    the tests on the value as it is."""
    with np.errstate(over="ignore"):
        x = X.astype(np.float16)
    for name in NAMES:
        out, trees = _trees(getattr(lnp, name), x)
        assert "np." + name in str(trees), trees
        np.testing.assert_array_equal(out, getattr(np, name)(x), err_msg=name)


def _lt(a, b):
    return ("LessThan", "bool", a, b)


def _not(a):
    return ("np.not", "bool", a)


def _and(a, b):
    return ("Mul", "bool", a, b)


def test_near_forms_are_kept():
    x, y = ("in", 0), ("in", 1)
    inf, minus_inf = ("const", math.inf, "float32"), ("const", -math.inf, "float32")
    big = ("const", 1e30, "float32")
    assert rewrite(_and(_lt(x, inf), _lt(minus_inf, x))) == ("np.isfinite", "bool", x)
    assert rewrite(_and(_lt(minus_inf, x), _lt(x, inf))) == ("np.isfinite", "bool", x)  # either order
    assert rewrite(_and(_not(_lt(x, inf)), _not(_lt(minus_inf, x)))) == ("np.isnan", "bool", x)
    for near in (_and(_lt(x, big), _lt(minus_inf, x)),  # below 1e30, not below inf
                 _and(_lt(x, inf), _lt(minus_inf, y)),  # two values
                 _and(_lt(x, inf), _lt(x, minus_inf)),
                 _and(_not(_lt(x, inf)), _lt(minus_inf, x)),  # +inf (half of isinf)
                 _and(_not(_lt(x, inf)), _not(_lt(minus_inf, y))),
                 ("Add", "bool", _and(_not(_lt(x, inf)), _lt(minus_inf, x)),
                  _and(_not(_lt(minus_inf, y)), _lt(y, inf))),  # +inf of x or -inf of y
                 ("Add", "bool", _lt(x, ("const", 0.0, "float32")), _lt(x, ("const", 1.0, "float32")))):
        out = rewrite(near)
        assert not any(name in str(out) for name in ("np.isnan", "np.isinf", "np.isfinite", "np.signbit")), out


@pytest.mark.parametrize("name", ["arcsinh", "sinh", "sign", "log1p", "nan_to_num", "isposinf"])
def test_a_rewritten_tree_rewrites_to_itself(name):
    """The whole-function matchers read the tests in NumPy's form too, so rewriting is
    idempotent: a tree rewritten once (its tests already np.isnan / np.isinf / np.signbit) is
    not taken apart by a second rewrite."""
    from test_numpy_peephole_odd import _front_end_tree

    tree = _front_end_tree(getattr(lnp, name), X)
    once = rewrite(tree)
    assert rewrite(once) == once


def test_whole_functions_read_the_tests_in_numpys_form():
    """sign's NaN select written with np.isnan is still np.sign (a tree rewritten once, or a
    user's sign over np.isnan); the helpers the matchers share take NumPy's forms of the tests."""
    from luminal_fn.backends.numpy.peephole_predicates import is_inf_test
    from luminal_fn.backends.numpy.tree_peephole import _is_nan_test, _is_signbit_test

    x, d = ("in", 0), "float32"
    zero = ("const", 0.0, d)
    diff = ("Add", d, ("Cast", d, ("LessThan", "bool", zero, x)),
            ("Mul", d, ("Cast", d, ("LessThan", "bool", x, zero)), ("const", -1.0, d)))
    assert rewrite(("Select", d, ("np.isnan", "bool", x), x, diff)) == ("np.sign", d, x)
    assert rewrite(("Select", d, ("np.isnan", "bool", ("in", 1)), x, diff))[0] == "Select"
    assert _is_nan_test(("np.isnan", "bool", x), x) and not _is_nan_test(("np.isinf", "bool", x), x)
    assert _is_signbit_test(("np.signbit", "bool", x), x) and not _is_signbit_test(("np.signbit", "bool", x), zero)
    assert is_inf_test(("np.isinf", "bool", x), x) and not is_inf_test(("np.isnan", "bool", x), x)

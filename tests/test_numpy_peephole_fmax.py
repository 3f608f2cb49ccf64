"""lnp.fmax / lnp.fmin on the NumPy backend (tree_peephole._fmax_fmin): the front end's three
selects, where(isnan(x), y, where(isnan(y), x, where(x < y, y, x))), are one select,
where(x < y or isnan(x), y, x), with the same bits in every case (ties give x, two NaNs give y);
not np.fmax, whose choice at +-0 ties and between two NaNs varies with its loop."""
import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy.tree_peephole import rewrite

F32 = np.float32
VALUES = np.concatenate([F32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.5, 1e-45, -1e-45, 3e38]),
                         np.int32([0x7FC00001, -4194303]).view(F32)])  # NaN payloads, a signed NaN
Y, X = (a.reshape(-1) for a in np.meshgrid(VALUES, VALUES, indexing="ij"))
X, Y = np.resize(X, (16, 67)), np.resize(Y, (16, 67))


def _reference(x, y, name):
    """lnp's definition, evaluated by NumPy's selects (which keep every operand's bits)."""
    pick_y = x < y if name == "fmax" else y < x
    return np.where(np.isnan(x), y, np.where(np.isnan(y), x, np.where(pick_y, y, x)))


def _run(fn, *args):
    jf = lf.jit(fn, backend="numpy", search=lf.SearchOptions(limit=1, cache=False))
    with np.errstate(all="ignore"):
        out = np.asarray(jf(*args))
    (compiled,) = jf.compiled()
    (plan,) = compiled.runner.plans.values()
    return out, [rewrite(n.attrs["expr"]) for n in plan.executable.plan.nodes
                 if n.op == "CustomOp" and n.attrs.get("name") == "fused"]


def _bits(a):
    return np.asarray(a).view(np.int32)


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_and_fmin_are_one_select_with_the_same_bits(name):
    """+-0 ties give x, one NaN gives the other operand, two NaNs give y (payloads kept)."""
    out, trees = _run(getattr(lnp, name), X, Y)
    (tree,) = trees
    assert tree[0] == "Select" and str(tree).count("Select") == 1, tree
    np.testing.assert_array_equal(_bits(out), _bits(_reference(X, Y, name)))
    out, _ = _run(getattr(lnp, name), X, F32(-0.0))  # a 0-d side
    np.testing.assert_array_equal(_bits(out), _bits(_reference(X, np.full_like(X, -0.0), name)))


def _form(m, x, y, first_nan_x=True, inner_y_first=True):
    """The front end's fmax with module m's functions, the NaN tests' order or the inner
    select's branches changeable."""
    r = m.where(m.less(x, y), y, x) if inner_y_first else m.where(m.less(x, y), x, y)
    if first_nan_x:
        return m.where(m.isnan(x), y, m.where(m.isnan(y), x, r))
    return m.where(m.isnan(y), x, m.where(m.isnan(x), y, r))


@pytest.mark.parametrize("change", [{}, {"first_nan_x": False}, {"inner_y_first": False},
                                    {"first_nan_x": False, "inner_y_first": False}])
def test_near_forms_keep_their_values(change):
    """With the NaN tests in the other order (two NaNs give x) or the inner branches swapped
    (a minimum), a user's function keeps its own bits, rewritten or not."""
    out, _ = _run(lambda x, y: _form(lnp, x, y, **change), X, Y)
    np.testing.assert_array_equal(_bits(out), _bits(_form(np, X, Y, **change)))


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_no_searched_candidate_raises(name):
    jf = lf.jit(getattr(lnp, name), backend="numpy", search=lf.SearchOptions(limit=30, cache=False))
    with np.errstate(all="ignore"):
        got = np.asarray(jf(X, Y))
    text = jf.compiled()[0].as_text()
    assert " 0 raised" in text, text.splitlines()[:3]
    np.testing.assert_array_equal(_bits(got), _bits(_reference(X, Y, name)))

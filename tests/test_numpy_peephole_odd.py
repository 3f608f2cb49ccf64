"""The NumPy backend's odd functions (backends/numpy/peephole_odd.py): lnp.arctan, lnp.arcsinh,
lnp.cbrt and lnp.sign, whole, become one np.arctan / np.arcsinh / np.cbrt / np.sign with NumPy's bits
(and tree_peephole's lnp.tan and lnp.ceil one np.tan / np.ceil); near forms are
kept. Near forms are edits of the trees the front end writes, read from the plan (merged, not yet
rewritten)."""
import math

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.numpy.kernels import compile_tree
from luminal_fn.backends.numpy.tree_peephole import LN2, rewrite
from luminal_fn.backends.numpy.tree_program import compile_program
from luminal_fn.ir import series
from test_numpy_peephole import EDGES, _trees

F32 = np.float32
NEAR_THRESHOLDS = F32([1.0, -1.0, np.nextafter(F32(1), F32(2)), np.nextafter(F32(1), F32(0)),
                       series.ARCTAN_REDUCED_BELOW, -series.ARCTAN_REDUCED_BELOW,
                       np.nextafter(F32(series.ARCTAN_REDUCED_BELOW), F32(1)),
                       np.nextafter(F32(series.ARCTAN_REDUCED_BELOW), F32(0)), 2.0 ** 28, -2.0 ** 28,
                       np.nextafter(F32(2.0 ** 28), F32(1e30)), np.nextafter(F32(2.0 ** 28), F32(0)),
                       1e30, -1e30, 1e-40, -1e-40, 1e-38, 3.4028235e38, 0.3, -7.5])
NAN_PAYLOADS = np.int32([0x7FC00001, -4194303]).view(F32)  # a payload, and a NaN with its sign set
X = np.concatenate([EDGES.reshape(-1), NEAR_THRESHOLDS, NAN_PAYLOADS, F32([-0.0, 0.0])]).reshape(2, -1)


def _front_end_tree(fn, x):
    """The one kernel's tree for fn(x), merged across kernels but not yet rewritten."""
    jf = lf.jit(fn, backend="numpy", search=lf.SearchOptions(limit=1, cache=False))
    np.asarray(jf(x))
    (compiled,) = jf.compiled()
    (plan,) = compiled.runner.plans.values()
    (tree,) = [n.attrs["expr"] for n in plan.executable.plan.nodes
               if n.op == "CustomOp" and n.attrs.get("name") == "fused"]
    return tree


def _edit(tree, fn, memo=None):
    """tree with fn applied to every node, bottom-up (a shared subtree once; a node whose
    children are unchanged is passed as the same object)."""
    memo = {} if memo is None else memo
    if id(tree) not in memo:
        node = tree
        if tree[0] not in ("in", "const", "iota"):
            kids = tuple(_edit(c, fn, memo) for c in tree[2:])
            if any(k is not c for k, c in zip(kids, tree[2:])):
                node = tree[:2] + kids
        memo[id(tree)] = fn(node)
    return memo[id(tree)]


def _const_replaced(tree, old, new):
    return _edit(tree, lambda t: ("const", new, t[2]) if t[0] == "const" and t[1] == old else t)


def _swapped(t):
    return ("Select", t[1], t[2], t[4], t[3])


@pytest.mark.parametrize("name", ["arctan", "arcsinh", "cbrt", "sign", "tan", "ceil", "log1p"])
def test_arctan_arcsinh_and_sign_are_numpys_own(name):
    """Each is one NumPy call once its kernels are merged (no select left), bit for bit NumPy's:
    signs of zeros (sign(-0.0) is +0.0, arctan(-0.0) is -0.0), NaN payloads, infinities,
    subnormals, huge values and both sides of every threshold the front end switches at."""
    out, trees = _trees(getattr(lnp, name), X)
    assert [t[0] for t in trees] == ["np." + name], trees
    assert not any("Select" in str(t) for t in trees), trees
    with np.errstate(invalid="ignore", divide="ignore"):
        want = getattr(np, name)(X)
    np.testing.assert_array_equal(out.view(np.int32), want.view(np.int32))


def test_int_sign_is_np_sign():
    x = np.int32([[0, -3, 5, -(2 ** 31), 2 ** 31 - 1, -1, 1]])
    out, trees = _trees(lnp.sign, x)
    assert [t[0] for t in trees] == ["np.sign"], trees
    np.testing.assert_array_equal(out, np.sign(x))
    assert out.dtype == np.int32


@pytest.mark.parametrize("name", ["arctan", "arcsinh", "cbrt", "sign", "tan", "ceil", "log1p"])
def test_float64_forms_are_recognised(name):
    """The same forms in float64 (a tree the backend may be handed) are the float64 call."""
    tree = _front_end_tree(getattr(lnp, name), X)
    tree64 = _edit(tree, lambda t: t[:1] + ("float64",) + t[2:] if t[1] == "float32" else
                   t[:2] + ("float64",) if t[0] == "const" and t[2] == "float32" else t)
    assert rewrite(tree64) == ("np." + name, "float64", ("in", 0))


# (near tree, whether the call may remain inside it: an edit of the sign select keeps the
# magnitude, which is still the function at |x|)
def _near_arctans(tree):
    yield _const_replaced(tree, series.ARCTAN_REDUCED_BELOW, 0.27), False  # another threshold
    yield _const_replaced(tree, math.pi / 6, 0.5236), False
    yield _const_replaced(tree, -1 / 11, -1 / 13), False  # another series
    yield _const_replaced(tree, math.sqrt(3.0), 1.7320508), False
    yield _swapped(tree), True
    # -m where x < 0, else m: arctan(-0.0) would be +0.0 (the zero select dropped)
    zero_select = tree[3]
    yield _edit(tree, lambda t: t[3] if t is zero_select else t), True


def _near_arcsinhs(tree):
    yield _const_replaced(tree, 2.0 ** 28, 2.0 ** 27), False
    # the magnitude's two branches swapped (log(a) + ln 2 is its branch above 2^28)
    yield _edit(tree, lambda t: _swapped(t) if t[0] == "Select" and t[4][0] == "Add"
                and t[4][3] == ("const", LN2, "float32") else t), False
    yield _edit(tree, lambda t: t[:3] + (("const", 0.69, "float32"),) if t[0] == "Add"
                and t[3] == ("const", LN2, "float32") else t), False  # log(a) + 0.69 above 2^28
    yield _swapped(tree), True


def _near_signs(tree):
    yield _const_replaced(tree, -1.0, -2.0), False
    yield _swapped(tree), False
    yield tree[3], False  # the difference alone: 0 at NaN, not NaN
    below = ("LessThan", "bool", ("in", 0), ("const", 0.0, "float32"))
    yield ("Select", "float32", below, tree[4], tree[3]), False  # x where x < 0, not where NaN


def _near_cbrts(tree):
    yield _const_replaced(tree, 1.0 / 3.0, 0.33), False  # another power
    yield _swapped(tree), True
    zero_select = tree[3]  # (the merged tree's first select is not(x < 0): its branches come swapped)
    yield _edit(tree, lambda t: t[4] if t is zero_select else t), True  # cbrt(-0.0) would be +0.0


def _near_tans(tree):
    sin_x, recip_cos = tree[2], tree[3]
    doubled = ("Mul", "float32", ("in", 0), ("const", 2.0, "float32"))
    yield ("Mul", "float32", ("Sin", "float32", doubled), recip_cos), False  # sin(2x) / cos(x)
    yield ("Mul", "float32", sin_x, recip_cos[2]), False  # sin(x) * cos(x)


def _near_ceils(tree):
    yield ("Mul", "float32", tree[2], ("const", -2.0, "float32")), False
    yield tree[2], False  # floor(-x) alone
    yield _const_replaced(tree, 1.0, 2.0), False  # the floor form changed


@pytest.mark.parametrize("name, nears", [("arctan", _near_arctans), ("arcsinh", _near_arcsinhs),
                                         ("cbrt", _near_cbrts), ("sign", _near_signs), ("tan", _near_tans),
                                         ("ceil", _near_ceils)])
def test_near_forms_are_kept(name, nears):
    """Another constant, another threshold, swapped branches or a missing piece are not NumPy's
    function: no call of it comes out (each edit really is made: the tree changed)."""
    tree = _front_end_tree(getattr(lnp, name), X)
    assert rewrite(tree) == ("np." + name, "float32", ("in", 0))
    for near, call_inside in nears(tree):
        assert near != tree
        out = rewrite(near)
        assert out[0] != "np." + name and ("np." + name in str(out)) <= call_inside, out


def test_int_sign_of_another_dtype_is_kept():
    """(0 < x) - (x < 0) in int32 is np.sign only for an int32 x: against float zeros x is a float
    (sign(0.5) would round to 0 if called on x cast to int32)."""
    def difference(zero):
        pos = ("Cast", "int32", ("LessThan", "bool", zero, ("in", 0)))
        neg = ("Cast", "int32", ("LessThan", "bool", ("in", 0), zero))
        return ("Add", "int32", pos, ("Mul", "int32", neg, ("const", -1, "int32")))

    assert rewrite(difference(("const", 0, "int32"))) == ("np.sign", "int32", ("in", 0))
    assert rewrite(difference(("const", 0.0, "float32")))[0] == "Add"
    assert rewrite(difference(("const", 1, "int32")))[0] == "Add"


def test_arctan_of_a_bare_magnitude_keeps_the_series_below_zero():
    """Where |x| is another kernel's value, arctan's magnitude is where(a < 0, series(a),
    np.arctan(a)): NumPy's arctan where the tree computes arctan, the tree's own bits below
    zero (which the front end never feeds it), so merges can go on without changing a value."""
    tree = _front_end_tree(lnp.arctan, X)
    found = []
    _edit(tree, lambda t: found.append(t[3]) or t if t[0] == "LessThan" and t[2] == ("const", 1.0, "float32")
          else t)
    magnitude = found[0]  # (the abs of x the series reads)
    bare = _edit(tree, lambda t: ("in", 1) if t is magnitude else t)
    rewritten = rewrite(bare)
    assert "np.arctan" in str(rewritten) and rewritten[0] == "Select"
    a = X.reshape(-1)
    x = np.ones_like(a)  # (x > 0: the odd select returns the magnitude)
    prog = compile_program(rewritten, [a.shape, a.shape], [lf.float32] * 2, "float32")
    with np.errstate(all="ignore"):
        got = prog(x, a)
        tree_bits = compile_tree(bare, lambda dims: a.shape)([x, a], {})
    want = np.where(a < 0, tree_bits, np.arctan(a))
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    assert (got[a < -1] != np.arctan(a[a < -1])).all()  # (the series there is not arctan)


def _arcsinh_magnitude_near_forms(m):
    """Edits of log1p inside arcsinh's magnitude m (its rewritten form)."""
    def edit(fn):
        return _edit(m, lambda t: fn(t) or t)

    def is_log_product(t):
        return t[0] == "Mul" and any(k[0] == "np.log" for k in t[2:])

    def is_posinf_test(t):  # isinf(u) and 0 < u
        return t[0] == "Mul" and t[1] == "bool" and t[3][0] == "LessThan" and t[3][2] == ("const", 0.0, "float32")

    def is_corrected_divisor(t):  # where(u - 1 == 0, 1, u - 1)
        return t[0] == "Select" and t[3] == ("const", 1.0, "float32") and t[4][0] == "Add"

    yield edit(lambda t: t[2] if is_posinf_test(t) else None)  # isinf(u)
    yield edit(lambda t: t[:3] + (t[3][:2] + (t[3][3], t[3][2]),) if is_posinf_test(t) else None)  # isneginf
    yield edit(lambda t: ("Recip", t[1], t[2][4]) if t[0] == "Recip" and is_corrected_divisor(t[2]) else None)
    yield edit(lambda t: t[:3] + (("const", 2.0, "float32"), t[4]) if is_corrected_divisor(t) else None)
    yield edit(lambda t: _swapped(t) if t[0] == "Select" and is_log_product(t[4]) else None)
    yield edit(lambda t: t[:3] + (("const", 0.0, "float32"), t[4]) if t[0] == "Select" and is_log_product(t[4])
               else None)  # 0, not y, where u - 1 == 0


def test_near_forms_of_log1p_inside_arcsinh_are_kept():
    """arcsinh's small branch is the front end's whole log1p (its rounding correction, its
    isposinf guard): another guard or correction is not arcsinh."""
    tree = _front_end_tree(lnp.arcsinh, X)
    found = []
    _edit(tree, lambda t: found.append(t[3]) or t if t[0] == "LessThan" and t[2] == ("const", 2.0 ** 28, "float32")
          else t)
    magnitude = found[0]  # (the abs of x it reads)
    m = rewrite(_edit(tree, lambda t: ("in", 1) if t is magnitude else t))[4][4]  # (not at a bare input)
    abs_x = ("np.abs", "float32", ("in", 0))
    # the log1p inside is np.log1p once rewritten: written back as the front end's form of it
    log1p_form = _log1p_root()
    at_abs = _edit(m, lambda t: _edit(log1p_form, lambda u: t[2] if u == ("in", 0) else u)
                   if t[0] == "np.log1p" else t)
    at_abs = _edit(at_abs, lambda t: abs_x if t == ("in", 1) else t)
    assert "np.log1p" not in str(at_abs)
    assert rewrite(at_abs) == ("np.arcsinh", "float32", abs_x)
    for near in _arcsinh_magnitude_near_forms(at_abs):
        assert near != at_abs
        assert "np.arcsinh" not in str(rewrite(near)), near


def _log1p_root():
    """lnp.log1p's select of x (input 0) as the matcher is handed it: its operands rewritten."""
    from luminal_fn.backends.numpy.tree_peephole import _rewrite

    tree = _front_end_tree(lnp.log1p, X)
    assert rewrite(tree) == ("np.log1p", "float32", ("in", 0))
    return tree[:2] + tuple(_rewrite(c, {}) for c in tree[2:])


def test_near_forms_of_log1p_are_kept():
    """lnp.log1p is np.log1p only with its whole rounding correction and its guards: the edits
    that make arcsinh's branch no arcsinh make log1p no log1p."""
    root = _log1p_root()
    for near in _arcsinh_magnitude_near_forms(root):
        assert near != root
        assert "np.log1p" not in str(rewrite(near)), near

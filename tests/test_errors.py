"""Bad input: every misuse raises a luminal_fn error that names the jitted function, points at
the user's line where it can, and says what to do instead."""
import inspect

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp

X = np.arange(4, dtype=np.float32)


def _at(fn, text: str) -> str:
    """'test_errors.py:<line>' of the line of ``fn``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(getattr(fn, "fn", fn))
    for k, line in enumerate(lines):
        if text in line:
            return f"test_errors.py:{first + k}"
    raise AssertionError(f"{text!r} not in the source of {fn}")


def test_python_branch_on_traced_value():
    @lf.jit
    def relu_branch(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(lf.TracingError) as info:
        relu_branch(X)
    msg = str(info.value)
    assert "jitted function 'relu_branch'" in msg and _at(relu_branch, "if x.sum()") in msg
    assert "where" in msg and "static_argnums" in msg


def test_while_loop_on_traced_value():
    @lf.jit
    def halve(x):
        while x.max() > 1:
            x = x / 2
        return x

    with pytest.raises(lf.TracingError, match="halve"):
        halve(X)


def test_escaped_tracer_used_after_the_trace():
    leaked = []

    @lf.jit
    def leak(x):
        leaked.append(x * 2)
        return x

    np.testing.assert_array_equal(np.asarray(leak(X)), X)  # storing it is not yet an error
    with pytest.raises(lf.TracingError, match=r"jitted function 'leak' escaped its trace.*return it"):
        leaked[0] + 1
    with pytest.raises(lf.TracingError, match="escaped"):
        lnp.sum(leaked[0])
    with pytest.raises(lf.TracingError, match="escaped"):
        bool(leaked[0])
    with pytest.raises(lf.TracingError, match="escaped"):
        np.asarray(leaked[0])

    @lf.jit
    def uses_leak(y):
        return y + leaked[0]

    with pytest.raises(lf.TracingError, match="'leak' escaped") as info:
        uses_leak(X)
    assert _at(uses_leak, "y + leaked[0]") in str(info.value)


def test_writing_a_tracer_into_a_captured_numpy_array():
    buf = np.zeros(4, np.float32)

    @lf.jit
    def set_elem(x):
        buf[0] = x[0]
        return x

    @lf.jit
    def set_slice(x):
        buf[:] = x
        return x

    @lf.jit
    def add_in_place(x):
        np.add(buf, x, out=buf)
        return x

    @lf.jit
    def copy_to(x):
        np.copyto(buf, x)
        return x

    for f, line in ((set_elem, "buf[0] = x[0]"), (set_slice, "buf[:] = x"),
                    (add_in_place, "np.add(buf"), (copy_to, "np.copyto")):
        with pytest.raises(lf.TracingError) as info:
            f(X)
        msg = str(info.value)
        assert f"jitted function '{f.name}'" in msg and _at(f, line) in msg, msg
        assert "return" in msg  # says what to do
    np.testing.assert_array_equal(buf, np.zeros(4, np.float32))  # nothing was written


@pytest.mark.parametrize("call,hint", [
    ("np.put(x, [0], 1.0)", "lnp.put(a, ind, v)"),
    ("np.put_along_axis(x, np.array([0]), 1.0, axis=0)", "lnp.put_along_axis"),
    ("np.fill_diagonal(x.reshape(2, 2), 1.0)", "lnp.fill_diagonal"),
    ("np.place(x, x > 0, 1.0)", "lnp.where"), ("np.putmask(x, x > 0, 1.0)", "lnp.where")])
def test_numpys_in_place_functions_on_a_traced_array_say_to_use_the_result(call, hint):
    """Run as the functional lnp forms, they would return a new array and leave the caller's
    unchanged, without a word: they raise instead, naming the form to use."""
    def f(x):
        eval(call)
        return x

    with pytest.raises(lf.TracingError) as info:
        lf.jit(f)(X)
    msg = str(info.value)
    assert "jitted function 'f'" in msg and hint in msg and "immutable" in msg, msg


def test_int_float_item_of_a_tracer():
    @lf.jit
    def to_int(x):
        return np.zeros(int(x[0]))

    @lf.jit
    def to_float(x):
        return float(x.sum())

    @lf.jit
    def to_item(x):
        return x[0].item()

    @lf.jit
    def as_range(x):
        return [x[i] for i in range(x[0])]

    for f, what in ((to_int, "int()"), (to_float, "float()"), (to_item, "item()"), (as_range, "int()")):
        with pytest.raises(lf.TracingError) as info:
            f(X)
        msg = str(info.value)
        assert what in msg and f"'{f.name}'" in msg and ("static" in msg or "array" in msg), msg


def test_shape_mismatch_names_op_shapes_function_and_line():
    @lf.jit
    def add_bad(x, y):
        return x + y

    with pytest.raises(lf.ShapeError) as info:
        add_bad(X, np.ones(3, np.float32))
    msg = str(info.value)
    assert "(4,)" in msg and "(3,)" in msg and "'add_bad'" in msg and _at(add_bad, "x + y") in msg

    @lf.jit
    def mm(a, b):
        return a @ b

    with pytest.raises(lf.ShapeError) as info:
        mm(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    assert "matmul" in str(info.value) and "'mm'" in str(info.value) and _at(mm, "a @ b") in str(info.value)


def test_bad_axis():
    @lf.jit
    def s(x):
        return x.sum(axis=2)

    with pytest.raises(lf.ShapeError) as info:
        s(X)
    msg = str(info.value)
    assert "axis 2" in msg and "'s'" in msg and _at(s, "axis=2") in msg

    @lf.jit
    def m(x):
        return lnp.mean(x, axis=-3)

    with pytest.raises(lf.ShapeError, match="axis -3.*'m'"):
        m(X)


def test_unsupported_dtype_argument_and_astype():
    @lf.jit
    def f(x):
        return x * 2

    with pytest.raises(lf.DTypeError, match=r"f: argument 'x': unsupported dtype complex64"):
        f(X.astype(np.complex64))
    assert f(X.astype(np.float64)).dtype == lf.float32  # float64 is narrowed, not an error

    @lf.jit
    def g(x):
        return x.astype(np.complex64)

    with pytest.raises(lf.DTypeError, match="complex64") as info:
        g(X)
    assert "'g'" in str(info.value) and _at(g, "astype") in str(info.value)


@pytest.mark.parametrize("index", ["a", 1.5, (0, 0)], ids=["str", "float", "too-many"])
def test_unsupported_index_forms(index):
    @lf.jit
    def pick(x):
        return x[index]

    with pytest.raises(lf.LuminalError) as info:
        pick(X)
    assert isinstance(info.value, IndexError)
    assert "'pick'" in str(info.value) and _at(pick, "x[index]") in str(info.value)


def test_traced_boolean_mask_index_says_what_to_do():
    @lf.jit
    def positives(x):
        return x[x > 1]

    with pytest.raises(lf.LuminalError, match="where") as info:
        positives(X)
    assert "'positives'" in str(info.value)


def test_non_hashable_static_argument():
    @lf.jit(static_argnums=1)
    def scale(x, factors):
        return x * factors[0]

    with pytest.raises(lf.ArgumentError, match=r"scale: static argument 'factors' of type list is not hashable.*tuple"):
        scale(X, [2.0])
    np.testing.assert_array_equal(np.asarray(scale(X, (2.0,))), X * 2)


def test_non_array_argument_and_result():
    @lf.jit
    def f(x, y):
        return x

    with pytest.raises(lf.ArgumentError, match=r"f: argument 'y' is a str.*static") as info:
        f(X, "hello")
    assert isinstance(info.value, TypeError) and isinstance(info.value, lf.LuminalError)

    @lf.jit
    def g(x):
        return x, "label"

    with pytest.raises(lf.TracingError, match=r"'g' returned a str at output 1"):
        g(X)


def test_wrong_arguments_name_the_function():
    @lf.jit
    def two(x, y):
        return x + y

    with pytest.raises(lf.LuminalError, match=r"two: missing a required argument: 'y'"):
        two(X)
    with pytest.raises(lf.LuminalError, match=r"two: too many positional arguments"):
        two(X, X, X)
    with pytest.raises(lf.LuminalError, match="static_argnames names 'z'"):
        lf.jit(two, static_argnames="z")
    with pytest.raises(lf.LuminalError, match="dynamic_axes names 'q'"):
        lf.jit(two, dynamic_axes={"q": {0: "s"}})
    with pytest.raises(lf.LuminalError, match="both static and donated"):
        lf.jit(two, static_argnums=0, donate_argnums=0)


def test_dynamic_dim_mismatch_is_caught_before_tracing():
    @lf.jit(dynamic_axes={"a": {0: "s"}, "b": {0: "s"}})
    def f(a, b):
        return a + b

    with pytest.raises(lf.ShapeError, match=r"f: dynamic dim 's' is 4 in argument 'a' but 5 in 'b'"):
        f(np.ones(4, np.float32), np.ones(5, np.float32))
    assert f.trace_count == 0
    f(np.ones(4, np.float32), np.ones(4, np.float32))
    with pytest.raises(lf.ShapeError, match="dynamic dim 's' is 6"):
        f(np.ones(6, np.float32), np.ones(7, np.float32))  # the dispatch path checks as well
    with pytest.raises(lf.ShapeError, match="axis 1 of 'a'"):
        lf.jit(lambda a: a, dynamic_axes={"a": {1: "s"}})(np.ones(3, np.float32))


def test_donated_array_read_after_the_call():
    @lf.jit(donate_argnums=0)
    def step(state, x):
        return state + x

    s = lf.device_put(np.zeros(4, np.float32))
    s2 = step(s, X)
    for read in (np.asarray, lambda a: a.item(), lambda a: a + 1, lambda a: a.block_until_ready()):
        with pytest.raises(lf.DonationError, match="donated"):
            read(s)
    with pytest.raises(lf.DonationError, match=r"step: argument 'state' .*donated"):
        step(s, X)
    np.testing.assert_array_equal(np.asarray(s2), X)


def test_numpy_functions_on_tracers_dispatch_or_explain():
    @lf.jit
    def ok(x):
        return np.sum(np.exp(x), axis=0) + np.maximum(x, 1.0)

    np.testing.assert_allclose(np.asarray(ok(X)), np.exp(X).sum() + np.maximum(X, 1.0), rtol=1e-6)

    @lf.jit
    def no_equivalent(x):
        return np.linalg.det(x.reshape(2, 2))

    with pytest.raises(lf.TracingError, match=r"numpy\.det cannot take traced values.*'no_equivalent'"):
        no_equivalent(X)


def test_where_points_at_the_user_line_outside_jit():
    a = lf.device_put(X)
    with pytest.raises(lf.ShapeError) as info:
        lnp.add(a, np.ones(3, np.float32))
    assert "test_errors.py:" in str(info.value)


# ---- the rest of issue 2's "Bad input" list -----------------------------------------------------
def _raises(exc, fn, *args, contains=()):
    with pytest.raises(exc) as info:
        fn(*args)
    msg = str(info.value)
    assert isinstance(info.value, lf.LuminalError), (type(info.value), msg)
    assert f"'{fn.name}'" in msg and "test_errors.py:" in msg, msg
    for part in contains:
        assert part in msg, (part, msg)
    return msg


M = np.arange(12, dtype=np.float32).reshape(3, 4)


def test_non_broadcastable_shapes_name_the_op_both_shapes_and_the_axis():
    @lf.jit
    def add_t(x):
        return x + x.T

    @lf.jit
    def where3(x):
        return lnp.where(x > 0, x, lnp.ones((2,)))

    @lf.jit
    def to(x):
        return lnp.broadcast_to(x, (2, 4, 3))

    _raises(lf.ShapeError, add_t, M, contains=("add", "(3, 4)", "(4, 3)", "axis -2"))
    _raises(lf.ShapeError, where3, M, contains=("where", "(2,)"))
    _raises(lf.ShapeError, to, M, contains=("broadcast_to", "(3, 4)", "(2, 4, 3)"))


@pytest.mark.parametrize("body,contains", [
    (lambda x: x.sum(axis=(0, -2)), ("sum", "repeated axis")),
    (lambda x: x.transpose(0, 0), ("transpose", "permutation")),
    (lambda x: lnp.concatenate([x, x], axis=2), ("concatenate", "axis 2")),
    (lambda x: lnp.expand_dims(x, 4), ("expand_dims", "axis 4")),
    (lambda x: lnp.squeeze(x, 0), ("squeeze", "size 3")),
    (lambda x: lnp.argmax(x, axis=-3), ("axis -3",)),
    (lambda x: lnp.moveaxis(x, 0, 5), ("moveaxis",)),
], ids=["repeated", "transpose", "concatenate", "expand_dims", "squeeze", "argmax", "moveaxis"])
def test_bad_axes_in_every_kind_of_function(body, contains):
    f = lf.jit(body)
    f.name = "axis_user"  # the lambda's name is '<lambda>'; any name works
    _raises(lf.ShapeError, f, M, contains=contains)


@pytest.mark.parametrize("body,contains", [
    (lambda x: lnp.concatenate([x, x.T], axis=0), ("concatenate", "(3, 4)", "(4, 3)")),
    (lambda x: lnp.stack([x, x[:2]]), ("stack", "(3, 4)", "(2, 4)")),
    (lambda x: x.reshape(5, -1), ("reshape", "(3, 4)", "(5, -1)")),
    (lambda x: lnp.split(x, 5, axis=1), ("split",)),
    (lambda x: lnp.einsum("ij,jk->ik", x, x), ("einsum", "'j'")),
    (lambda x: x.at[0].set(np.ones(5, np.float32)), ("(5,)", "(4,)")),
    (lambda x: x @ np.ones(3, np.float32), ("matmul", "(3, 4)")),
], ids=["concatenate", "stack", "reshape", "split", "einsum", "at-set", "matmul"])
def test_shape_mismatches_in_shape_functions(body, contains):
    f = lf.jit(body)
    f.name = "shape_user"
    _raises(lf.ShapeError, f, M, contains=contains)


def test_unsupported_dtype_uses():
    @lf.jit
    def neg_bool(x):
        return -(x > 1)

    @lf.jit
    def exp_str(x):
        return lnp.exp("abc") + x

    @lf.jit
    def sum_complex(x):
        return lnp.sum(x, dtype=np.complex64)

    _raises(lf.DTypeError, neg_bool, M, contains=("negative", "bool", "logical_not"))
    _raises(lf.DTypeError, exp_str, M, contains=("str",))
    _raises(lf.DTypeError, sum_complex, M, contains=("complex64",))

    @lf.jit
    def ident(x):
        return x

    with pytest.raises(lf.DTypeError, match=r"ident: argument 'x': unsupported dtype <U1"):
        ident(np.array(["a", "b"]))


def test_writing_into_a_captured_luminal_array():
    state = lf.device_put(np.zeros(4, np.float32))

    @lf.jit
    def writes(x):
        state[0] = x[0]
        return x

    msg = _raises(lf.TracingError, writes, X, contains=("captured", "at[idx].set", "return"))
    assert _at(writes, "state[0] = x[0]") in msg
    np.testing.assert_array_equal(np.asarray(state), np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="immutable"):  # outside a trace: plain immutability
        state[0] = 1.0


def test_non_hashable_static_keyword_argument():
    @lf.jit(static_argnames="cfg")
    def scaled(x, cfg):
        return x * cfg["a"]

    with pytest.raises(lf.ArgumentError, match=r"scaled: static argument 'cfg' of type dict is not hashable"):
        scaled(X, cfg={"a": 2})


def test_donated_pytree_leaves_name_the_function_that_consumed_them():
    @lf.jit(donate_argnums=0)
    def update(state, g):
        return {"w": state["w"] - g, "n": state["n"] + 1}

    s = {"w": lf.device_put(np.ones(4, np.float32)), "n": lf.device_put(np.zeros((), np.int32))}
    new = update(s, X)
    for leaf in s.values():
        assert leaf.is_deleted()
        with pytest.raises(lf.DonationError, match=r"donated to jitted function 'update'.*test_errors\.py:\d+"):
            np.asarray(leaf)
    np.testing.assert_array_equal(np.asarray(new["w"]), 1 - X)
    assert int(new["n"]) == 1


@pytest.mark.parametrize("body,exc,contains", [
    (lambda x: x[5], IndexError, ("index 5", "size 3")),
    (lambda x: x[:, -5], IndexError, ("index -5", "size 4")),
    (lambda x: x[np.array([0, 7])], IndexError, ("index 7",)),
    (lambda x: x[np.array([0.5, 1.0])], IndexError, ("integers or booleans", "float")),
    (lambda x: x[x[0, 0]], IndexError, ("integers", "astype")),
    (lambda x: x[{"a": 1}], IndexError, ("dict",)),
    (lambda x: lnp.take(x, np.array([20])), IndexError, ("index 20",)),
], ids=["int", "negative-int", "int-array", "float-array", "traced-float", "dict", "take"])
def test_index_errors_are_raised_not_clamped(body, exc, contains):
    f = lf.jit(body)
    f.name = "index_user"
    msg = _raises(exc, f, M, contains=contains)
    assert "index_user" in msg


def test_a_traced_value_as_a_shape():
    @lf.jit
    def sized(x):
        return lnp.zeros(x[0] * 2)

    @lf.jit
    def ranged(x):
        return lnp.arange(x[0])

    _raises(lf.TracingError, sized, X, contains=("shape", "static"))
    _raises(lf.TracingError, ranged, X, contains=("float()",))


# ---- reshape(-1, k) of a dynamic axis -------------------------------------------------------------
def test_reshape_minus_one_of_a_dynamic_axis_is_checked_per_call():
    @lf.jit(dynamic_axes={"x": {0: "s"}})
    def rows_of_four(x):
        return x.reshape(-1, 4).sum(axis=1)

    for n in (8, 4, 12):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(np.asarray(rows_of_four(x)), x.reshape(-1, 4).sum(axis=1))
    assert rows_of_four.trace_count == 1 and rows_of_four.compile_count == 1
    with pytest.raises(lf.ShapeError) as info:
        rows_of_four(np.arange(6, dtype=np.float32))
    msg = str(info.value)
    assert "rows_of_four" in msg and "reshape of shape (s,) into (-1, 4)" in msg
    assert "multiple of 4" in msg and "s=6" in msg and "lnp.pad" in msg
    assert _at(rows_of_four, "x.reshape(-1, 4)") in msg
    assert rows_of_four.trace_count == 1  # the check runs at dispatch: no retrace
    text = rows_of_four.trace(np.arange(8, dtype=np.float32)).as_text()
    assert "requires (4 * (s // 4)) == s" in text  # the printout shows the assumption


def test_reshape_of_a_dynamic_axis_through_a_strided_view():
    @lf.jit(dynamic_axes={"x": {1: "s"}})
    def halves(x):
        return x.T.reshape(2, -1) * 2

    for cols in (4, 6):
        x = np.arange(3 * cols, dtype=np.float32).reshape(3, cols)
        np.testing.assert_array_equal(np.asarray(halves(x)), x.T.reshape(2, -1) * 2)
    with pytest.raises(lf.ShapeError, match=r"size \(3 \* s\) to be a multiple of 2.*s=5"):
        halves(np.ones((3, 5), np.float32))


def test_ops_that_need_a_static_axis_say_so_for_a_dynamic_one():
    @lf.jit(dynamic_axes={"x": {0: "s"}})
    def halves(x):
        return lnp.split(x, 2)[0]

    @lf.jit(dynamic_axes={"x": {0: "s"}})
    def largest(x):  # (roll, prod, cumprod and cummax work along a dynamic axis: test_numpy_shape.py)
        return lnp.top_k(x, 2)[0]

    for f, op in ((halves, "split"), (largest, "top_k")):
        with pytest.raises(lf.ShapeError) as info:
            f(np.arange(4, dtype=np.float32))
        msg = str(info.value)
        assert op in msg and "symbolic dim s" in msg and "dynamic_axes" in msg, msg
        assert f"'{f.name}'" in msg and "test_errors.py:" in msg, msg

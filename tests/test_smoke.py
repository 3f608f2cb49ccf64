import numpy as np

import luminal_fn as lf
import luminal_fn.numpy as lnp


def test_mlp_matches_numpy(rng):
    params = {"w1": rng.standard_normal((8, 16)).astype(np.float32),
              "b1": rng.standard_normal(16).astype(np.float32),
              "w2": rng.standard_normal((16, 4)).astype(np.float32)}
    x = rng.standard_normal((5, 8)).astype(np.float32)

    @lf.jit
    def mlp(p, x):
        h = lnp.maximum(x @ p["w1"] + p["b1"], 0.0)
        return lf.nn.softmax(h @ p["w2"], axis=-1)

    y = mlp(params, x)
    assert isinstance(y, lf.Array)
    h = np.maximum(x @ params["w1"] + params["b1"], 0)
    z = h @ params["w2"]
    e = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(y), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    text = str(lf.make_hlir(mlp)(params, x))
    assert "SumReduce" in text and "Exp2" in text and "Input" in text


def test_where_is_exact_with_infinities():
    @lf.jit
    def f(x, m):
        return lnp.where(m, x, -np.inf)

    x = np.array([1.0, np.inf, -2.0, np.nan], np.float32)
    m = np.array([True, False, True, True])
    np.testing.assert_array_equal(np.asarray(f(x, m)), np.where(m, x, -np.inf).astype(np.float32))

"""The search's check of each candidate's outputs against the reference candidate's
(optimize/evaluate.py ``CandidateEvaluator._check``): a relative L2 error over the reference's finite
elements above AGREEMENT rejects it, as does NaN or Inf where the reference is finite. Outputs
are compared as float32 (floats of up to 32 bits) or float64 (the rest): checked here against
float64 NumPy on the edge cases that could differ (huge values, bf16, ints, masks of NaN)."""
import ml_dtypes
import numpy as np
import pytest

from luminal_fn.backends.base import Backend
from luminal_fn.optimize.evaluate import AGREEMENT, CandidateEvaluator
from luminal_fn.optimize.memory import CandidateRejected


class _Host(Backend):
    """A backend of host arrays: the base class's host comparison (backends/compare.py)."""

    @staticmethod
    def to_numpy(a):
        return np.asarray(a)


class _Checker:
    """CandidateEvaluator._check with no search around it."""

    backend = _Host()

    def __init__(self, *reference):
        self.reference = None
        self.check(*reference)

    def check(self, *outs):
        CandidateEvaluator._check(self, list(outs))


def _err64(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    fin = np.isfinite(ref)
    return np.linalg.norm(got[fin] - ref[fin]) / np.linalg.norm(ref[fin])


R = np.random.default_rng(0)


@pytest.mark.parametrize("scale", [1.0, 1e-20, 1e30])
def test_agreement_as_float64_numpy_measures_it(scale):
    ref = (R.standard_normal(100_000) * scale).astype(np.float32)
    c = _Checker(ref)
    for rel in (1e-3, 0.5 * AGREEMENT, 2 * AGREEMENT, 0.3):
        got = (ref * (1 + rel * R.standard_normal(ref.size))).astype(np.float32)
        err = _err64(got, ref)
        if err <= AGREEMENT or np.abs(got - ref).max() <= 1e-5:
            c.check(got)  # accepted (huge values squared do not overflow)
        else:
            with pytest.raises(CandidateRejected, match="relative error"):
                c.check(got)
    assert _err64((ref * 1.3).astype(np.float32), ref) > AGREEMENT
    if scale >= 1:
        with pytest.raises(CandidateRejected, match="relative error"):
            c.check((ref * 1.3).astype(np.float32))
    else:  # differences all below 1e-5: too small to reject, whatever their relative size
        c.check((ref * 1.3).astype(np.float32))


def test_non_finite_values():
    ref = np.array([1.0, np.nan, np.inf, -2.0, 3.0], np.float32)
    c = _Checker(ref)
    c.check(np.array([1.0, 5.0, np.nan, -2.0, 3.0], np.float32))  # where the reference is not finite: free
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(CandidateRejected, match="NaN/Inf"):
            c.check(np.array([1.0, np.nan, np.inf, bad, 3.0], np.float32))
    big = np.float32(3e38)
    c = _Checker(np.array([big, -big], np.float32))
    with pytest.raises(CandidateRejected, match="relative error"):  # (the difference overflows float32)
        c.check(np.array([-big, big], np.float32))


def test_bfloat16_and_int_outputs_beside_each_other():
    logits = R.standard_normal((4, 300)).astype(ml_dtypes.bfloat16)
    token = np.array([7], np.int32)
    c = _Checker(logits, token)
    near = (logits.astype(np.float32) + np.float32(0.01)).astype(ml_dtypes.bfloat16)
    c.check(near, token)
    with pytest.raises(CandidateRejected, match="output 1"):
        c.check(near, np.array([9], np.int32))
    with pytest.raises(CandidateRejected, match="output 0"):
        c.check(-logits, token)
    assert c.reference[0].values.dtype == np.float32 and c.reference[1].values.dtype == np.float64


class _Exe:
    """A candidate's executable: outputs as a function of the inputs."""

    def __init__(self, fn):
        self.fn, self.runs = fn, 0

    def run(self, inputs, dims):
        self.runs += 1
        return self.fn(inputs)


class _Rechecker(_Checker):
    """_Checker with a second sample of inputs, as CandidateEvaluator has in a search."""

    def __init__(self, first, second, reference_fn):
        self.made = 0

        def second_inputs():
            self.made += 1
            return second

        self.backend = _HostBuffers()
        self.run_dims, self._second, self.n_rechecked = {}, None, 0
        self._second_inputs = second_inputs
        self.reference = None
        self.reference_exe = _Exe(reference_fn)
        CandidateEvaluator._check(self, self.reference_exe.run(first, {}), self.reference_exe)

    def check(self, outs, exe):
        CandidateEvaluator._check(self, list(outs), exe)

    def _second_sample(self):
        return CandidateEvaluator._second_sample(self)


class _HostBuffers(_Host):
    @staticmethod
    def is_buffer(a):
        return isinstance(a, np.ndarray)


def test_integer_outputs_alone_differing_are_checked_on_a_second_sample():
    """A greedy token from bf16 logits whose top two are within rounding: correct candidates
    pick either. Such a candidate agrees on other inputs and is kept; one that picks wrong
    everywhere, or whose floats differ too, is dropped."""
    x1, x2 = R.standard_normal(50).astype(np.float32), R.standard_normal(50).astype(np.float32)
    pick = lambda xs: [xs[0] * 2, np.array([np.argmax(xs[0])], np.int32)]  # noqa: E731
    c = _Rechecker([x1], [x2], pick)
    runner_up = int(np.argsort(x1)[-2])
    # picks the runner-up on the first sample only (a near tie there), agrees on the second
    flip = _Exe(lambda xs: [xs[0] * 2, np.array([runner_up if xs[0] is x1 else np.argmax(xs[0])], np.int32)])
    c.check(flip.run([x1], {}), flip)
    assert c.n_rechecked == 1 and c.made == 1 and c.reference_exe.runs == 2  # (the first sample, then the second)
    c.check(flip.run([x1], {}), flip)
    assert c.n_rechecked == 2 and c.made == 1 and c.reference_exe.runs == 2  # the second sample and its reference made once
    off = _Exe(lambda xs: [xs[0] * 2, np.array([(np.argmax(xs[0]) + 1) % 50], np.int32)])
    with pytest.raises(CandidateRejected, match=r"output 1 .*: \[\d+\] against \[\d+\]; and on a second sample"):
        c.check(off.run([x1], {}), off)
    both = _Exe(lambda xs: [xs[0] * 3, np.array([runner_up], np.int32)])
    with pytest.raises(CandidateRejected, match="output 0 disagrees") as e:
        c.check(both.run([x1], {}), both)
    assert "second sample" not in str(e.value) and both.runs == 1 and c.n_rechecked == 2


def _pairs():
    """(reference, candidate) outputs covering each path of the comparison."""
    ref = R.standard_normal((64, 300)).astype(np.float32)
    nan_ref = ref.copy()
    nan_ref[3, :7] = np.nan
    bad = ref.copy()
    bad[5, 5] = np.inf
    logits = ref.astype(ml_dtypes.bfloat16)
    return {
        "float32_near": (ref, ref * np.float32(1.001)),
        "float32_far": (ref, -ref),
        "float32_nan_in_ref": (nan_ref, np.where(np.isnan(nan_ref), 5.0, nan_ref * 1.5).astype(np.float32)),
        "float32_inf_in_got": (ref, bad),
        "bfloat16": (logits, (logits.astype(np.float32) + 0.25).astype(ml_dtypes.bfloat16)),
        "float16": (ref.astype(np.float16), (ref * 1.01).astype(np.float16)),
        "int32_token": (np.array([7], np.int32), np.array([9], np.int32)),
        "bool_mask": (ref > 0, ref > 0.1),
    }


@pytest.mark.parametrize("case", sorted(_pairs()))
def test_host_distance_is_float64_numpys(case):
    from luminal_fn.backends.compare import host_distance, keep_host

    ref, got = _pairs()[case]
    kept = keep_host(ref)
    d = host_distance(got, kept)
    r64, g64 = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    fin = np.isfinite(r64)
    assert d.finite == bool(np.isfinite(g64[fin]).all())
    assert kept.discrete == (np.asarray(ref).dtype.kind in "biu")
    assert kept.shown == (np.asarray(ref).ravel().tolist() if np.asarray(ref).size <= 4 else None)
    if d.finite:
        diff = np.abs(g64[fin] - r64[fin])
        np.testing.assert_allclose(d.biggest, diff.max(), rtol=1e-6)
        np.testing.assert_allclose(d.l2, np.linalg.norm(diff), rtol=1e-5)
        np.testing.assert_allclose(kept.norm, np.linalg.norm(r64[fin]), rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(_pairs()))
def test_cuda_measures_on_the_device_as_the_host_does(case):
    """The CUDA backend keeps the reference on the device and measures there: the same
    figures as the host comparison, and the kept copy does not follow later writes."""
    from luminal_fn.backends import get_backend
    from luminal_fn.backends.compare import host_distance, keep_host

    cuda = get_backend("cuda")
    ref, got = _pairs()[case]
    buf = cuda.from_numpy(ref)
    kept = cuda.keep_output(buf)
    buf.fill(0)  # (an executable may reuse its output buffer)
    d = cuda.output_distance(cuda.from_numpy(got), kept)
    want_kept = keep_host(ref)
    want = host_distance(got, want_kept)
    assert (kept.discrete, kept.shown) == (want_kept.discrete, want_kept.shown)
    np.testing.assert_allclose(kept.norm, want_kept.norm, rtol=1e-5)
    assert d.finite == want.finite
    if want.finite:
        np.testing.assert_allclose([d.biggest, d.l2], [want.biggest, want.l2], rtol=1e-5)


def _host_figures(ref, got):
    from luminal_fn.backends.compare import host_distance, keep_host

    return host_distance(got, keep_host(ref))


def _assert_same_figures(d, want):
    assert d.finite == want.finite
    if want.finite:
        np.testing.assert_allclose([d.biggest, d.l2], [want.biggest, want.l2], rtol=1e-5)


def test_output_distances_measures_each_output_as_output_distance_does():
    """Backend.output_distances (the search's check of all a candidate's outputs): each
    output's figures, in order, on the host backend's default."""
    from luminal_fn.backends import get_backend

    be = get_backend("numpy")
    pairs = [_pairs()[c] for c in sorted(_pairs())]
    kept = [be.keep_output(be.from_numpy(ref)) for ref, _ in pairs]
    got = be.output_distances([be.from_numpy(g) for _, g in pairs], kept)
    assert len(got) == len(pairs)
    for d, (ref, g) in zip(got, pairs):
        _assert_same_figures(d, _host_figures(ref, g))


@pytest.mark.gpu
def test_cuda_measures_all_outputs_with_one_read_back():
    """The CUDA backend measures every output of a candidate into one array of figures: each
    output's figures are the host comparison's, whatever its dtype, an empty one included."""
    from luminal_fn.backends import get_backend

    cuda = get_backend("cuda")
    pairs = [_pairs()[c] for c in sorted(_pairs())] + [(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32))]
    kept = [cuda.keep_output(cuda.from_numpy(ref)) for ref, _ in pairs]
    got = cuda.output_distances([cuda.from_numpy(g) for _, g in pairs], kept)
    assert len(got) == len(pairs)
    for d, (ref, g) in zip(got, pairs):
        _assert_same_figures(d, _host_figures(ref, g))

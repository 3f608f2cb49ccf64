"""The llama_1b example (examples/llama_1b.py, examples/llama/) against a Llama written here in plain
float64 NumPy, independent of luminal_fn and of the example's own helpers (weights read with the
safetensors library, rope scaling written out band by band, attention with repeated KV heads)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import luminal_fn as lf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
sys.path.insert(0, EXAMPLES)

import llama_1b  # noqa: E402
from llama import checkpoint, model  # noqa: E402
from llama.config import ModelInputError, load_config  # noqa: E402
from llama.generation import LlamaSession, Sampler, compile_report, generate_ids, sample_greedy  # noqa: E402
from llama.tiny import build_tiny_random  # noqa: E402
from llama.tokenizer import encode_chat, load_tokenizer  # noqa: E402

MAX_SEQ = 128
TOL = 1e-4


# ---- the float64 reference ------------------------------------------------------------------------
class RefLlama:
    def __init__(self, model_dir: str):
        from safetensors.numpy import load_file

        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = json.load(f)
        self.w = {k: v.astype(np.float64) for k, v in
                  load_file(os.path.join(model_dir, "model.safetensors")).items()}
        c = self.cfg
        self.h, self.kvh = c["num_attention_heads"], c["num_key_value_heads"]
        self.d = c.get("head_dim") or c["hidden_size"] // self.h
        self.inv_freq = self._inv_freq()

    def _inv_freq(self) -> np.ndarray:
        c, d = self.cfg, self.d
        base = [1.0 / c["rope_theta"] ** (2 * i / d) for i in range(d // 2)]
        sc = c.get("rope_scaling")
        if not sc:
            return np.array(base)
        assert sc["rope_type"] == "llama3"
        old = sc["original_max_position_embeddings"]
        low_wl, high_wl = old / sc["low_freq_factor"], old / sc["high_freq_factor"]
        out = []
        for f in base:  # Meta's Llama-3 scaling, one band at a time
            wl = 2 * math.pi / f
            if wl < high_wl:
                out.append(f)
            elif wl > low_wl:
                out.append(f / sc["factor"])
            else:
                t = (old / wl - sc["low_freq_factor"]) / (sc["high_freq_factor"] - sc["low_freq_factor"])
                out.append((1 - t) * f / sc["factor"] + t * f)
        return np.array(out)

    def _norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.cfg["rms_norm_eps"]) * w

    def _rope(self, x, pos):  # x (n, heads, d)
        ang = pos[:, None] * self.inv_freq[None, :]
        cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
        half = self.d // 2
        rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
        return x * cos[:, None, :] + rot * sin[:, None, :]

    def logits(self, ids) -> np.ndarray:
        """(len(ids), vocab) logits of the whole sequence, causal."""
        w, n, d = self.w, len(ids), self.d
        pos = np.arange(n, dtype=np.float64)
        x = w["model.embed_tokens.weight"][np.asarray(ids)]
        causal = np.triu(np.full((n, n), -np.inf), 1)
        for i in range(self.cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self._norm(x, w[p + "input_layernorm.weight"])
            q = self._rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, self.h, d), pos)
            k = self._rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, self.kvh, d), pos)
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, self.kvh, d)
            k, v = np.repeat(k, self.h // self.kvh, axis=1), np.repeat(v, self.h // self.kvh, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(d) + causal
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            x = x + np.einsum("hqk,khd->qhd", s, v).reshape(n, self.h * d) @ w[p + "self_attn.o_proj.weight"].T
            h = self._norm(x, w[p + "post_attention_layernorm.weight"])
            g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
        x = self._norm(x, w["model.norm.weight"])
        head = w["model.embed_tokens.weight"] if self.cfg.get("tie_word_embeddings") else w["lm_head.weight"]
        return x @ head.T


# ---- fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny_random(str(tmp_path_factory.mktemp("tiny_llama")), seed=0)


@pytest.fixture(scope="module")
def ref(tiny_dir):
    return RefLlama(tiny_dir)


@pytest.fixture(scope="module")
def prompt(tiny_dir):
    return encode_chat(load_tokenizer(tiny_dir), "layers of neurons")


@pytest.fixture(scope="module")
def session(tiny_dir, tmp_path_factory):
    """The tiny model jitted once (a small search, its own cache folder), warmed up."""
    cfg = load_config(tiny_dir)
    weights = checkpoint.load_weights(tiny_dir, cfg, "float32", backend="numpy")
    search = llama_1b.search_options(2, None, 0, progress=False,
                                     cache_dir=str(tmp_path_factory.mktemp("search_cache")))
    s = LlamaSession(cfg, weights, max_seq_len=MAX_SEQ, buckets=model.dim_buckets(64, MAX_SEQ),
                     search=search, backend="numpy")
    s.warm_up()
    return s


def close(a, b, tol=TOL):
    return float(np.max(np.abs(np.asarray(a, np.float64) - b)))


# ---- the model against the reference -----------------------------------------------------------
def test_reference_rope_scaling_covers_every_band(ref):
    """The tiny config has bands kept, slowed and blended by Llama-3 scaling (else the rope test
    would not reach all three branches)."""
    base = 1.0 / ref.cfg["rope_theta"] ** (np.arange(0, ref.d, 2) / ref.d)
    ratio = ref.inv_freq / base
    assert np.any(np.isclose(ratio, 1.0)) and np.any(np.isclose(ratio, 1 / 32))
    assert np.any((ratio > 1 / 32 + 1e-6) & (ratio < 1 - 1e-6))


def test_prefill_and_decode_logits_match_reference(session, ref, prompt):
    session.reset()
    row, _ = session.run(prompt)
    want = ref.logits(prompt)
    assert np.abs(want).max() > 1.0  # real logits, not near zero
    assert close(row, want[-1]) < TOL
    seq = list(prompt)
    for tok in (5, 77, 200, 301, 12):  # decode steps, each one new token through the cache
        row, _ = session.run([tok])
        seq.append(tok)
        assert close(row, ref.logits(seq)[-1]) < TOL, f"decode at position {len(seq) - 1}"


def test_greedy_ids_match_reference_for_32_steps(session, ref, prompt):
    ids, reason, profiles = generate_ids(session, prompt, 32, stop_ids=(), repetition_penalty=1.0)
    assert reason == "max_new_tokens" and len(ids) == 32 and len(profiles) == 32
    seq, want, gaps = list(prompt), [], []
    for _ in range(32):
        row = ref.logits(seq)[-1]
        top2 = np.sort(row)[-2:]
        gaps.append(top2[1] - top2[0])
        want.append(int(np.argmax(row)))
        seq.append(want[-1])
    assert min(gaps) > 10 * TOL  # no near-ties, so float32 rounding cannot flip a choice
    assert ids == want
    assert len(set(ids)) > 3  # the tiny model does not just repeat one token


@pytest.mark.gpu
def test_greedy_ids_on_the_gpu_match_reference(tiny_dir, ref, prompt, tmp_path):
    """The pipelined greedy loop on the CUDA backend: the pick inside the step's graph, each
    token fed to the next step as the device array it left there."""
    cfg = load_config(tiny_dir)
    weights = checkpoint.load_weights(tiny_dir, cfg, "float32", backend="cuda")
    search = llama_1b.search_options(2, None, 0, progress=False, cache_dir=str(tmp_path))
    s = LlamaSession(cfg, weights, max_seq_len=MAX_SEQ, buckets=model.dim_buckets(64, MAX_SEQ),
                     search=search, backend="cuda", steps=("greedy",))
    s.warm_up()
    ids, reason, _ = generate_ids(s, prompt, 16, repetition_penalty=1.0)
    seq, want = list(prompt), []
    for _ in range(16):
        row = ref.logits(seq)[-1]
        top2 = np.sort(row)[-2:]
        assert top2[1] - top2[0] > 10 * TOL  # no near-tie: float32 rounding cannot flip a choice
        want.append(int(np.argmax(row)))
        seq.append(want[-1])
    assert reason == "max_new_tokens" and ids == want
    assert (s.greedy_step.trace_count, s.greedy_step.compile_count) == (1, 1)


def test_cached_steps_equal_recomputing_the_sequence(session, prompt):
    """Prefill + decode through the cache gives the logits of running the whole sequence at once."""
    extra = [40, 41, 42, 43]
    session.reset()
    session.run(prompt)
    incremental = [session.run([t])[0] for t in extra]
    for k in range(len(extra)):
        session.reset()
        full, _ = session.run(prompt + extra[:k + 1])
        assert close(incremental[k], full) < 1e-5


def test_decode_steps_neither_retrace_nor_recompile(session, prompt):
    step = session.step
    traces, compiles = step.trace_count, step.compile_count
    assert (traces, compiles) == (1, 1)  # the warm-up compiled everything once
    searched = compile_report(step)  # e-graph and per-bucket search figures, where exposed
    session.reset()
    session.run(prompt[:3])       # another prefill length
    for t in range(6):            # decode steps: c grows by one each time
        session.run([t])
    session.run(prompt[:20])      # a longer prefill on top of the context
    assert (step.trace_count, step.compile_count) == (traces, compiles)
    assert compile_report(step) == searched  # no bucket was searched again
    # the step that picks its token on the device: warmed up too, and the same for every length
    greedy = session.greedy_step
    assert (greedy.trace_count, greedy.compile_count) == (1, 1)
    picked = compile_report(greedy)
    generate_ids(session, prompt[:7], 5, repetition_penalty=1.0)
    generate_ids(session, prompt, 3, repetition_penalty=1.0)
    assert (greedy.trace_count, greedy.compile_count) == (1, 1) and compile_report(greedy) == picked


def test_the_greedy_loop_hands_each_token_over_before_the_next_step_on_numpy(session, prompt):
    """On a backend whose calls return computed arrays the pipelined loop does not run ahead
    (that would only hold each token back a step): when token k reaches on_token, the cache
    holds the prompt and k decode steps, not k + 1. The ids are the loop's usual ones."""
    seen = []
    ids, reason, profiles = generate_ids(session, prompt, 6, repetition_penalty=1.0,
                                         on_token=lambda t: seen.append((t, session.length)))
    assert reason == "max_new_tokens" and [t for t, _ in seen] == ids and len(profiles) == 6
    assert [n for _, n in seen] == [len(prompt) + k for k in range(6)]
    assert all(p.execute > 0 for p in profiles)  # each token's own step is timed as its queueing


def test_the_greedy_step_returns_the_logits_steps_argmax(session, prompt):
    """make_step(output="greedy") is make_step's logits followed by the pick, in one graph: the
    token it leaves on the device is the argmax of the logits step's last row, for a prefill and
    for decode steps fed that device token."""
    session.reset()
    row, _ = session.run(prompt)
    tokens = [int(np.argmax(row))]
    for _ in range(3):
        row, _ = session.run(tokens[-1:])
        tokens.append(int(np.argmax(row)))
    session.reset()
    token = session.launch(list(prompt))
    got = [int(np.asarray(token)[0])]
    for _ in range(3):
        token = session.launch(token)  # the device array, as the pipelined loop passes it
        got.append(int(np.asarray(token)[0]))
    assert got == tokens and np.asarray(token).dtype == np.int32 and np.asarray(token).shape == (1,)


def test_a_session_warms_up_only_the_steps_it_names(tiny_dir, session):
    s = LlamaSession(session.config, session.weights, max_seq_len=MAX_SEQ, buckets=session.buckets,
                     search=session.step.search, backend="numpy", steps=("greedy",))
    s.warm_up()
    assert s.warmed == [s.greedy_step] and s.greedy_step.compile_count == 1
    assert s.step.trace_count == 0 and s.step.compile_count == 0  # the logits step: never traced
    with pytest.raises(ValueError, match="steps must name some of"):
        LlamaSession(session.config, session.weights, max_seq_len=MAX_SEQ, buckets=session.buckets,
                     backend="numpy", steps=("sampled",))
    with pytest.raises(ValueError, match="make_step: output must be one of"):
        model.make_step(session.config, output="probs")


def test_buckets_follow_the_seed():
    # a 69-token chat prompt and 96 new tokens, as the seed's defaults
    assert model.bucket_limits(69, 96, 2048) == (128, 256)
    assert model.dim_buckets(128, 256) == {"s": [(1, 1), (2, 128, 16)], "c": [(1, 1), (2, 256, 16)]}
    assert model.bucket_limits(2000, 96, 2048) == (2048, 2048)  # capped at max_seq_len
    assert model.dim_buckets(8, 1) == {"s": [(1, 1), (2, 8, 8)], "c": [(1, 1)]}
    assert model.representative_dims(model.dim_buckets(128, 8)) == (16, 8)


def test_repetition_penalty_follows_the_seed():
    row = np.array([2.0, -1.0, 1.95, 0.5], np.float32)
    assert sample_greedy(row, set(), 1.05) == 0
    assert sample_greedy(row, {0}, 1.05) == 2          # 2.0 / 1.05 < 1.95
    assert sample_greedy(-np.abs(row), {3}, 2.0) == 1  # a negative logit is multiplied


def test_bfloat16_weights_stay_bfloat16_and_track_float32(tiny_dir, session, prompt):
    cfg = session.config
    w16 = checkpoint.load_weights(tiny_dir, cfg, "bfloat16", backend="numpy")
    assert w16["layers"][0]["q"].dtype == lf.bfloat16 and w16["embed"].dtype == lf.bfloat16
    assert w16["norm"].dtype == lf.float32
    session.reset()
    want, _ = session.run(prompt)
    s16 = LlamaSession(cfg, w16, max_seq_len=MAX_SEQ, buckets=session.buckets,
                       search=session.step.search, backend="numpy")
    got, _ = s16.run(prompt)
    assert 0 < close(got, want) < 0.1 * np.abs(want).max()  # rounded weights, same model


def test_rotary_slices_keep_a_dynamic_axis():
    """x[..., :h] on a dynamic axis kept a max(s, 0) length that no longer broadcast with s."""
    f = lf.jit(lambda x, c: x[..., :2] * c[:, None, :] + x[..., 2:],
               dynamic_axes={"x": {0: "s"}, "c": {0: "s"}})
    x = np.arange(24, dtype=np.float32).reshape(3, 2, 4)
    c = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(np.asarray(f(x, c)), x[..., :2] * c[:, None, :] + x[..., 2:])


# ---- the example end to end -------------------------------------------------------------------
def test_tiny_random_example_runs_and_reports_ttft_tpot(tmp_path):
    env = dict(os.environ, LUMINAL_BACKEND="numpy", LUMINAL_CACHE_DIR=str(tmp_path),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "llama_1b.py"), "--tiny-random",
                        "--max-new-tokens", "6", "--search-graphs", "2", "--ignore-eos"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    ttft = [ln for ln in lines if ln.strip().startswith("TTFT:")]
    tpot = [ln for ln in lines if ln.strip().startswith("TPOT:")]
    assert len(ttft) == 1 and len(tpot) == 1, r.stdout
    assert float(ttft[0].split()[1]) > 0 and float(tpot[0].split()[1]) > 0
    assert any(ln.strip().startswith("Profile: n=6") for ln in lines), r.stdout
    assert "Weight load:" in r.stdout and "Generated 6 tokens" in r.stdout


def test_generate_returns_ids_text_and_times(tiny_dir, session):
    res = llama_1b.generate(tiny_dir, "neural networks", max_new_tokens=5, backend="numpy",
                            repetition_penalty=1.0, ignore_eos=True, search=session.step.search)
    ids, text, ttft, tpot = res
    assert len(ids) == 5 and ttft > 0 and tpot > 0 and (res.trace_count, res.compile_count) == (1, 1)
    assert text == load_tokenizer(tiny_dir).decode(ids, skip_special_tokens=True)
    # the same ids as the session's greedy decoding of the same chat prompt
    want, _, _ = generate_ids(session, res.prompt_ids, 5, repetition_penalty=1.0)
    assert ids == want


# ---- sampling on the device (top-k, top-p, temperature) ------------------------------------------
def _numpy_draw(logits, u, seen, k, temperature, top_p=1.0, penalty=1.0, kept=None):
    """The draw sample_token makes, in float64 NumPy: the penalty, jax.lax.top_k's k (ties: the
    lower token first), the nucleus (a token stays while the probability before it is below
    top_p; ``kept`` overrides how many stay), then the kept tokens' cumulative probability
    inverted at u. Returns the token, the draw's margin (how far u is from the nearest boundary
    between two kept tokens: float32 rounding may move a draw across a boundary closer than that),
    the nucleus's margin (how far top_p is from the nearest probability before a token), the kept
    tokens and their cumulative probabilities."""
    row = logits[-1].astype(np.float32)
    if seen is not None:
        row = np.where(seen, np.where(row > 0, row / np.float32(penalty), row * np.float32(penalty)), row)
    top = np.argsort(-row, kind="stable")[:k]
    p = np.exp((row[top].astype(np.float64) - row[top[0]]) / temperature)
    p /= p.sum()
    before = np.cumsum(p) - p
    if kept is None:
        kept = int(np.sum(before < top_p)) if top_p < 1 else k
    nucleus = float(np.min(np.abs(before - top_p))) if top_p < 1 else 1.0
    cum = np.cumsum(p[:kept]) / p[:kept].sum()
    pick = min(int(np.sum(cum <= u)), kept - 1)
    margin = float(np.min(np.abs(cum[:-1] - u))) if kept > 1 else 1.0
    return int(top[pick]), margin, nucleus, top[:kept], cum


def _check_draws(fn, rng, shape, k, temperature, top_p, penalty, trials, scale=2.0, tol=1e-5):
    """``trials`` draws of ``fn`` (model.make_sampler's) from logits ``scale`` * N(0, 1) against
    _numpy_draw: the same token where u is over 1e-4 from every boundary between kept tokens;
    nearer one, a kept token whose interval of the cumulative probability, widened by ``tol`` each
    side for float32 rounding, holds u. Where top_p is within 1e-3 of the probability before a
    token (float32 sums of a vocabulary row are that far off), the nucleus one token shorter or
    longer is as right. Returns how many draws were exact."""
    exact = 0
    for trial in range(trials):
        logits = (scale * rng.standard_normal(shape)).astype(np.float32)
        logits[-1, ::7] = logits[-1, 3]  # ties, some of them among the k largest
        seen = rng.random(shape[1]) < 0.3 if penalty != 1.0 else None
        u = rng.random(1, dtype=np.float32)
        got = int(np.asarray(fn(logits, u, *(() if seen is None else (seen,))))[0])
        args = (logits, float(u[0]), seen, k, temperature, top_p, penalty)
        draws = [_numpy_draw(*args)]
        if draws[0][2] < 1e-3:
            n = len(draws[0][3])
            draws += [_numpy_draw(*args, kept=m) for m in (n - 1, n + 1) if 1 <= m <= k]
        if all(d[1] > 1e-4 for d in draws):
            assert got in [d[0] for d in draws], (trial, got, [d[0] for d in draws])
            exact += 1
            continue
        near = set()
        for _, _, _, kept, cum in draws:
            lo, hi = np.concatenate([[0.0], cum[:-1]]) - tol, cum + tol
            hi[-1] = np.inf  # (u at the very top is the last kept token's)
            near.update(kept[(lo <= u[0]) & (u[0] < hi)].tolist())
        assert got in near, (trial, got, draws[0][0], sorted(near)[:10])
    return exact


@pytest.mark.parametrize("k, temperature, top_p, penalty", [
    (4, 0.7, 1.0, 1.3),   # top-k, the penalty
    (20, 1.2, 0.8, 1.0),  # top-k then top-p
    (50, 0.9, 0.5, 1.1),  # top-p alone (k: the whole row)
    (1, 1.0, 1.0, 1.0),   # greedy
])
def test_sample_token_is_the_inverse_cdf_draw_of_the_kept_tokens(k, temperature, top_p, penalty):
    fn = model.make_sampler(k, temperature, top_p, penalty, backend="numpy")
    assert _check_draws(fn, np.random.default_rng(3), (2, 50), k, temperature, top_p, penalty, 20) >= 17


@pytest.mark.gpu
@pytest.mark.parametrize("k, top_p", [(40, 1.0), (40, 0.9), (128256, 0.9)])
def test_sample_token_on_the_gpu(k, top_p):
    """A vocabulary-sized row on CUDA: the top_k_rows kernel (k = the row: the whole sort), the
    scan of the k probabilities, the draw."""
    fn = model.make_sampler(k, 0.8, top_p, 1.2, backend="cuda")
    # k = the row: logits 4 * N(0, 1) keep 8-160 tokens of real mass, each draw over 6e-4 from a
    # boundary. (From 2 * N(0, 1) the nucleus is ~20000 tokens of ~1e-5 each, nearer every draw
    # than a float32 scan of the row is exact: NumPy's sequential cumsum drops 3e-4 of the total.)
    scale = 4.0 if k == 128256 else 2.0
    assert _check_draws(fn, np.random.default_rng(4), (1, 128256), k, 0.8, top_p, 1.2, 5, scale) >= 4


def test_sample_token_of_a_vocabulary_row_on_numpy():
    """The GPU test's whole-row case on the NumPy backend."""
    fn = model.make_sampler(128256, 0.8, 0.9, 1.2, backend="numpy", search=lf.SearchOptions(limit=4))
    assert _check_draws(fn, np.random.default_rng(4), (1, 128256), 128256, 0.8, 0.9, 1.2, 5, 4.0) >= 4


def _draw_counts(sampler, logits, n=4000):
    counts = np.zeros(logits.shape[-1])
    for _ in range(n):
        counts[sampler(logits)] += 1
        sampler.seen[:] = False
    return counts


def _within_4_sd(counts, p):
    n = counts.sum()
    sd = np.sqrt(n * p * (1 - p))
    assert np.all(np.abs(counts - n * p) <= 4 * sd + 1e-9), (counts, n * p)


def test_top_k_sampling_draws_from_the_softmax_of_the_k_largest():
    """4000 draws (k = 3 of 6 tokens, temperature 0.7, no penalty) against softmax(top 3 / 0.7):
    every count within 4 standard deviations, the other tokens never drawn."""
    logits = np.float32([[0.5, 2.0, -1.0, 1.5, 1.9, 0.0]])
    counts = _draw_counts(Sampler(6, 3, 1.0, 0.7, 1.0, seed=5, backend="numpy"), logits)
    p = np.zeros(6)
    top = [1, 4, 3]
    e = np.exp(logits[0, top] / 0.7 - np.max(logits[0, top] / 0.7))
    p[top] = e / e.sum()
    _within_4_sd(counts, p)
    assert counts[[0, 2, 5]].sum() == 0


def test_top_p_sampling_draws_from_the_nucleus():
    """Probabilities 0.4, 0.3, 0.2, 0.1 (as logits): top_p 0.65 keeps the first two (0.4 is below
    it, 0.7 is not), top_p 0.75 the first three; the kept tokens at their renormalised odds."""
    probs = np.array([0.1, 0.4, 0.2, 0.3])
    logits = np.log(probs).astype(np.float32)[None]
    for top_p, kept in ((0.65, [1, 3]), (0.75, [1, 3, 2])):
        counts = _draw_counts(Sampler(4, 0, top_p, 1.0, 1.0, seed=11, backend="numpy"), logits)
        p = np.zeros(4)
        p[kept] = probs[kept] / probs[kept].sum()
        _within_4_sd(counts, p)
        assert counts[[i for i in range(4) if i not in kept]].sum() == 0, (top_p, counts)


def test_sampled_generation_is_seeded_and_k_1_is_greedy(tiny_dir, session, prompt):
    kw = dict(backend="numpy", search=session.step.search)
    vocab = session.config.vocab_size
    greedy, _, _ = generate_ids(session, prompt, 8, repetition_penalty=1.1)
    one = Sampler(vocab, 1, 0.9, 0.5, 1.1, seed=0, **kw)
    assert generate_ids(session, prompt, 8, repetition_penalty=1.1, sampler=one)[0] == greedy
    five = Sampler(vocab, 5, 0.9, 1.5, 1.1, seed=7, **kw)
    a, _, profiles = generate_ids(session, prompt, 8, sampler=five)
    b, _, _ = generate_ids(session, prompt, 8, sampler=five)  # (reset: the same seed again)
    assert a == b and len(a) == 8 and len(profiles) == 8

    def run(**opts):
        return llama_1b.generate(tiny_dir, "neural networks", max_new_tokens=6, ignore_eos=True, seed=7,
                                 **kw, **opts).ids

    ids = run(top_k=5, top_p=0.9, temperature=1.5)
    assert len(ids) == 6 and ids == run(top_k=5, top_p=0.9, temperature=1.5)
    # a temperature alone samples the whole vocabulary: top_k = the vocabulary's size
    assert run(temperature=1.5) == run(top_k=vocab, temperature=1.5)


@pytest.mark.parametrize("opts, match", [(dict(top_k=-1), "top_k must be an int >= 0"),
                                         (dict(top_k=2.5), "top_k must be an int"),
                                         (dict(top_k=3, temperature=0.0), "temperature must be > 0"),
                                         (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
                                         (dict(top_p=1.5), r"top_p must be in \(0, 1\]"),
                                         (dict(top_k=10 ** 9), "more than the vocabulary")])
def test_bad_sampling_options(tiny_dir, no_long_work, opts, match):
    with pytest.raises(ModelInputError, match=match):
        llama_1b.generate(tiny_dir, "hi", max_new_tokens=2, backend="numpy", **opts)


# ---- bad input: a clear message before any long work --------------------------------------------
@pytest.fixture
def no_long_work(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("weights were loaded before the input was checked")

    monkeypatch.setattr(llama_1b.checkpoint, "load_weights", boom)
    monkeypatch.setattr(llama_1b.checkpoint, "random_weights", boom)


def _copy_tiny(src, dst, skip=()):
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name not in skip:
            with open(os.path.join(src, name), "rb") as f, open(os.path.join(dst, name), "wb") as g:
                g.write(f.read())
    return str(dst)


def _edit_config(d, **changes):
    path = os.path.join(d, "config.json")
    with open(path) as f:
        raw = json.load(f)
    raw.update(changes)
    with open(path, "w") as f:
        json.dump(raw, f)


def test_missing_model_dir(tmp_path, no_long_work):
    with pytest.raises(ModelInputError, match="does not exist"):
        llama_1b.generate(str(tmp_path / "nope"), "hi")
    with pytest.raises(ModelInputError, match="no config.json"):
        llama_1b.generate(str(tmp_path), "hi")


@pytest.mark.parametrize("skip, match", [(("model.safetensors",), "neither model.safetensors"),
                                         (("tokenizer.json",), "no tokenizer.json")])
def test_incomplete_model_dir(tiny_dir, tmp_path, no_long_work, skip, match):
    d = _copy_tiny(tiny_dir, tmp_path / "m", skip)
    with pytest.raises(ModelInputError, match=match):
        llama_1b.generate(d, "hi")


def test_truncated_checkpoint(tiny_dir, tmp_path, no_long_work):
    d = _copy_tiny(tiny_dir, tmp_path / "m")
    path = os.path.join(d, "model.safetensors")
    os.truncate(path, os.path.getsize(path) - 100)
    with pytest.raises(ModelInputError, match="truncated"):
        llama_1b.generate(d, "hi")


def test_unsupported_architecture(tiny_dir, tmp_path, no_long_work):
    d = _copy_tiny(tiny_dir, tmp_path / "m")
    _edit_config(d, architectures=["MistralForCausalLM"], model_type="mistral")
    with pytest.raises(ModelInputError, match="MistralForCausalLM.*not supported"):
        llama_1b.generate(d, "hi")


def test_config_and_checkpoint_disagree(tiny_dir, tmp_path, no_long_work):
    d = _copy_tiny(tiny_dir, tmp_path / "m")
    _edit_config(d, intermediate_size=96)
    with pytest.raises(ModelInputError, match="do not match"):
        llama_1b.generate(d, "hi")


def test_prompt_longer_than_max_seq_len(tiny_dir, no_long_work):
    with pytest.raises(ModelInputError, match=r"longer than max_seq_len 16.*--max-seq-len"):
        llama_1b.generate(tiny_dir, "a long prompt " * 20, max_seq_len=16)


def test_dtype_that_cannot_be_loaded(tiny_dir, tmp_path, no_long_work):
    with pytest.raises(ModelInputError, match="float16.*float32, bfloat16"):
        llama_1b.generate(tiny_dir, "hi", dtype="float16")
    # a quantized (int8) tensor in the checkpoint
    from safetensors.numpy import load_file, save_file

    d = _copy_tiny(tiny_dir, tmp_path / "m")
    path = os.path.join(d, "model.safetensors")
    t = load_file(path)
    t["model.layers.0.mlp.up_proj.weight"] = t["model.layers.0.mlp.up_proj.weight"].astype(np.int8)
    save_file(t, path)
    with pytest.raises(ModelInputError, match="I8, which cannot be loaded as bfloat16"):
        llama_1b.generate(d, "hi", dtype="bfloat16")


def test_unknown_backend(tiny_dir, no_long_work):
    with pytest.raises(ModelInputError, match="backend 'tpu'"):
        llama_1b.generate(tiny_dir, "hi", backend="tpu")


def test_cli_prints_the_error_and_exits_2(tmp_path, capsys, no_long_work):
    assert llama_1b.main(["--model-dir", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("llama_1b: error:") and "does not exist" in err


def test_sharded_checkpoint_with_a_missing_shard(tiny_dir, tmp_path, no_long_work):
    d = _copy_tiny(tiny_dir, tmp_path / "m", skip=("model.safetensors",))
    os.rename(_copy_tiny(tiny_dir, tmp_path / "src") + "/model.safetensors",
              os.path.join(d, "model-00001-of-00002.safetensors"))
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                                  "model.norm.weight": "model-00002-of-00002.safetensors"}}, f)
    with pytest.raises(ModelInputError, match="model-00002-of-00002.safetensors is missing"):
        llama_1b.generate(d, "hi")


def test_repo_that_cannot_be_fetched_says_how_to_get_the_files(monkeypatch, capsys, no_long_work):
    import types

    def offline(repo_id, **kw):
        raise OSError("no network")

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(snapshot_download=offline))
    assert llama_1b.main(["--repo", "someone/some-llama"]) == 2
    err = capsys.readouterr().err
    assert "cannot get someone/some-llama" in err and "--model-dir" in err and "--tiny-random" in err


def test_benchmark_script_runs_on_the_tiny_shape(tmp_path, monkeypatch, capsys):
    """benchmarks/llama_bench.py (the 1B --random-weights figures on a device) end to end on the
    tiny shape, so it does not rot between GPU runs."""
    import importlib.util

    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("llama_bench", os.path.join(ROOT, "benchmarks", "llama_bench.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    assert bench.main(["--tiny", "--backend", "numpy", "--dtype", "float32", "--max-new-tokens", "3",
                       "--search-graphs", "1", "--prompt-tokens", "5", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(r["dtype"], r["prompt_tokens"], r["new_tokens"]) for r in rows] == [("float32", 5, 3)]
    assert rows[0]["ttft_ms"] > 0 and rows[0]["tpot_ms"] > 0 and rows[0]["compiles"] == 1
    assert "| float32 | numpy | 5 | 3 |" in capsys.readouterr().out


def test_pipelined_greedy_equals_the_host_loop_and_stops(session, prompt):
    """Greedy decoding picks on the device and queues one step ahead; the ids are those of the
    host loop (logits read, argmax in NumPy), and a stop token ends it without being kept."""
    ids, reason, profiles = generate_ids(session, prompt, 6, repetition_penalty=1.0)
    assert reason == "max_new_tokens" and len(ids) == 6 and len(profiles) == 6
    session.reset()
    host, pending = [], list(prompt)
    for _ in range(6):
        row, _ = session.run(pending)
        host.append(sample_greedy(row, set(), 1.0))
        pending = [host[-1]]
    assert host == ids
    stop = ids[2]
    got, reason, _ = generate_ids(session, prompt, 6, stop_ids=(stop,), repetition_penalty=1.0)
    assert reason == "stop token" and got == ids[:ids.index(stop)]


def test_the_seeds_gather_form_reads_the_same_context(tiny_dir, ref, prompt):
    """contiguous_cache=False is the seed's step: the context rows are gathered through
    gather_idx instead of read as a view of rows 0..c-1; both match the float64 reference, and
    the gather form really gathers (a reversed gather_idx with a matching mask permutes the
    context without changing the result, attention being order-free over keys)."""
    cfg = load_config(tiny_dir)
    weights = checkpoint.load_weights(tiny_dir, cfg, "float32", backend="numpy")
    step = model.make_step(cfg, backend="numpy", contiguous_cache=False,
                           search=lf.SearchOptions(limit=1, progress=False, cache=False))
    cache = model.new_cache(cfg, MAX_SEQ, "numpy")
    logits, cache = step(weights, *model.step_inputs(prompt, 0, contiguous_cache=False), cache)
    assert close(np.asarray(logits)[-1], ref.logits(prompt)[-1]) < TOL
    seq = list(prompt) + [42]
    tokens, pos, scatter, gather_idx, mask = model.step_inputs([42], len(prompt), contiguous_cache=False)
    logits, cache = step(weights, tokens, pos, scatter, gather_idx[::-1].copy(), mask[:, ::-1].copy(), cache)
    assert close(np.asarray(logits)[-1], ref.logits(seq)[-1]) < TOL

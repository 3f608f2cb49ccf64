"""The generation loop of the seed: one jitted step, the KV cache kept on the device (donated and
returned each step), greedy sampling with a repetition penalty, per-step timing (TTFT, TPOT);
and sampling (top-k, top-p, temperature) on the device (Sampler)."""
from __future__ import annotations

import dataclasses
import time

import numpy as np

import luminal_fn as lf

from . import model
from .config import LlamaConfig, ModelInputError


@dataclasses.dataclass
class StepProfile:
    """Seconds spent in one step (the seed's StepProfile without its cache hand-over, which is an
    assignment here): the whole step, queueing the jitted call, and reading the logits (or the
    picked token) back to the host, which waits for the device."""
    total: float
    execute: float
    logits: float


@dataclasses.dataclass
class GenerationResult:
    """``ids, text, ttft_ms, tpot_ms = generate(...)`` unpacks the first four fields."""
    ids: list
    text: str
    ttft_ms: float
    tpot_ms: float
    prompt_ids: list = dataclasses.field(default_factory=list)
    stop_reason: str = ""
    profiles: list = dataclasses.field(default_factory=list)
    timings: dict = dataclasses.field(default_factory=dict)
    trace_count: int = 0
    compile_count: int = 0

    def __iter__(self):
        return iter((self.ids, self.text, self.ttft_ms, self.tpot_ms))

    def profile_line(self) -> str:
        n = len(self.profiles)
        avg = (lambda attr: 1e3 * sum(getattr(p, attr) for p in self.profiles) / n) if n else (lambda a: 0.0)
        return f"Profile: n={n}, exec={avg('execute'):.2f} ms, logits={avg('logits'):.2f} ms"


def sample_greedy(logits_row: np.ndarray, seen: set, repetition_penalty: float) -> int:
    """The seed's sampler: tokens already generated have positive logits divided by the penalty and
    negative ones multiplied by it; then argmax. A penalty of 1.0 is plain greedy decoding."""
    row = np.asarray(logits_row, dtype=np.float32)
    if repetition_penalty != 1.0 and seen:
        row = row.copy()
        idx = np.fromiter(seen, dtype=np.int64)
        vals = row[idx]
        row[idx] = np.where(vals > 0, vals / repetition_penalty, vals * repetition_penalty)
    return int(np.argmax(row))


def check_sampling(top_k, top_p: float, temperature: float, vocab_size: int | None = None):
    """Raise ModelInputError for sampling options no Sampler takes (``vocab_size``: also a top_k
    past the vocabulary)."""
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
        raise ModelInputError(f"top_k must be an int >= 0 (0: no top-k cut), got {top_k!r}")
    if vocab_size is not None and top_k > vocab_size:
        raise ModelInputError(f"top_k {top_k} is more than the vocabulary's {vocab_size} tokens")
    if not 0 < top_p <= 1:
        raise ModelInputError(f"top_p must be in (0, 1] (1: no nucleus cut), got {top_p!r}")
    if not temperature > 0:
        raise ModelInputError(f"temperature must be > 0 (top_k 1 is greedy), got {temperature!r}")


class Sampler:
    """Sampling on the logits' device (model.sample_token, jitted once): the seed's repetition
    penalty through a mask of the tokens drawn so far, the temperature, the ``top_k`` largest
    logits (0: the whole vocabulary), then the nucleus of probability ``top_p`` (1.0: all of
    them), drawn with a uniform number from a NumPy generator seeded by ``seed``. :meth:`reset`
    (each generate_ids call) starts the mask and the generator over: the same seed, the same
    tokens. top_k = 1 is greedy decoding."""

    def __init__(self, vocab_size: int, top_k: int = 0, top_p: float = 1.0, temperature: float = 1.0,
                 repetition_penalty: float = 1.0, seed: int = 0, *, backend=None, search=None, buckets=None):
        check_sampling(top_k, top_p, temperature, vocab_size)
        self.k = int(top_k) or vocab_size
        self.fn = model.make_sampler(self.k, float(temperature), float(top_p), float(repetition_penalty),
                                     backend=backend, search=search, buckets=buckets)
        self.penalized = float(repetition_penalty) != 1.0
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.seen = np.zeros(vocab_size, bool)

    def reset(self):
        self.seen[:] = False
        self.rng = np.random.default_rng(self.seed)

    def warm_up(self, rows: int = 1) -> float:
        """Trace, search and compile at ``rows`` logits rows (a step's: 1); the seconds taken."""
        t0 = time.perf_counter()
        zeros = np.zeros((rows, self.seen.size), np.float32)
        np.asarray(self.fn(zeros, np.zeros(1, np.float32), *self._mask()))
        return time.perf_counter() - t0

    def __call__(self, logits) -> int:
        """The next token from a step's logits (s, vocab), still on the device; waits for it."""
        u = self.rng.random(1, dtype=np.float32)
        token = int(np.asarray(self.fn(logits, u, *self._mask())).reshape(-1)[0])
        self.seen[token] = True
        return token

    def _mask(self) -> tuple:
        return (self.seen,) if self.penalized else ()


class LlamaSession:
    """The weights, the jitted step and the cache of one model on one backend.

    Two steps are jitted (each once, with dynamic ``s`` and ``c``): ``step`` returns the logits
    (:meth:`run`: the last row goes to the host, for a sampler there), ``greedy_step`` the greedy
    next token, picked inside the step's graph (:meth:`launch`: the pipelined greedy loop).
    :meth:`warm_up` runs those named in ``steps`` at the buckets' representative sizes (tracing,
    e-graph, search per bucket, compile); every later prefill or decode step reuses that compiled
    graph. A step not warmed up compiles at its first call."""

    def __init__(self, config: LlamaConfig, weights: dict, *, max_seq_len: int, buckets: dict,
                 search=None, backend=None, steps=model.STEP_OUTPUTS):
        unknown = set(steps) - set(model.STEP_OUTPUTS)
        if unknown or not steps:
            raise ValueError(f"LlamaSession: steps must name some of {model.STEP_OUTPUTS}, got {steps!r}")
        self.config = config
        self.weights = weights
        self.max_seq_len = max_seq_len
        self.buckets = buckets
        self.backend = backend
        self.steps = tuple(steps)
        self.step, self.greedy_step = (
            model.make_step(config, backend=backend, buckets=buckets, search=search, output=out)
            for out in model.STEP_OUTPUTS)
        self.cache = model.new_cache(config, max_seq_len, backend)
        self.length = 0  # cache rows in use

    @property
    def warmed(self) -> list:
        """The jitted steps :meth:`warm_up` compiles, in ``steps`` order."""
        return [self.step if out == "logits" else self.greedy_step for out in self.steps]

    def warm_up(self) -> float:
        """Trace, build, search and compile at the representative dims; returns the seconds taken.
        The rows it writes into the cache are never read: every step writes its rows before
        attention reads them, and reads only rows below the context length."""
        s, c = model.representative_dims(self.buckets)
        t0 = time.perf_counter()
        tokens = np.full(s, self.config.bos_token_id or 0, np.int32)
        pos = np.arange(s, dtype=np.int32)
        prompt = (tokens, pos, pos, np.zeros((s, c), np.float32))
        for jitted in self.warmed:  # the prompt bucket, then the decode one (s = 1, c >= 2)
            for args in (prompt, model.step_inputs([0], 1)):
                out, self.cache = jitted(self.weights, *args, self.cache)
                np.asarray(out)  # waits
        return time.perf_counter() - t0

    def reset(self):
        self.length = 0

    def _queue(self, jitted, tokens):
        """Queue ``jitted`` for ``tokens`` (a list, or the (1,) token array a previous greedy
        step left on the device) at the end of the context; its first output, not waited for."""
        n = len(tokens)
        if self.length + n > self.max_seq_len:
            raise ValueError(f"the context would grow to {self.length + n} tokens, past "
                             f"max_seq_len {self.max_seq_len}")
        args = model.step_inputs(tokens if isinstance(tokens, list) else [0] * n, self.length)
        if not isinstance(tokens, list):
            args = (tokens,) + args[1:]  # the device token, never read back to build the input
        # the donated cache is consumed; the returned one is the live one
        out, self.cache = jitted(self.weights, *args, self.cache)
        self.length += n
        return out

    def _logits(self, tokens):
        """The logits of a step queued for ``tokens``, not waited for."""
        return self._queue(self.step, tokens)

    def launch(self, tokens):
        """Queue one step that picks its greedy next token on the device; returns that token as
        a device array without waiting for it, its copy to the host already queued behind the
        step (so reading it waits for this step only, not for a step queued after it)."""
        return self._queue(self.greedy_step, tokens).copy_to_host_async()

    def run(self, tokens, read=None) -> tuple:
        """Append ``tokens`` at the end of the context; returns (the last logits row, or
        ``read(logits)`` of the step's device logits, e.g. a Sampler's token; StepProfile)."""
        t0 = time.perf_counter()
        logits = self._logits(list(tokens))
        t1 = time.perf_counter()
        out = np.asarray(logits)[-1] if read is None else read(logits)
        t2 = time.perf_counter()
        return out, StepProfile(total=t2 - t0, execute=t1 - t0, logits=t2 - t1)


def generate_ids(session: LlamaSession, prompt_ids: list, max_new_tokens: int, stop_ids=(),
                 repetition_penalty: float = 1.05, on_token=None, sampler: Sampler | None = None) -> tuple:
    """Prefill then decode, greedily (or with ``sampler``, which applies its own penalty).
    Returns (generated ids, the stop token's reason, profiles). The stop token itself is not part
    of the ids; ``on_token(id)`` sees every kept token. Plain greedy decoding (penalty 1.0, no
    sampler) picks tokens on the device and runs one step ahead."""
    if repetition_penalty == 1.0 and sampler is None:
        return generate_ids_pipelined(session, prompt_ids, max_new_tokens, stop_ids, on_token)
    stop_ids = set(stop_ids)
    session.reset()
    if sampler is not None:
        sampler.reset()
    ids: list = []
    profiles: list = []
    seen: set = set()
    reason = "max_new_tokens"
    if max_new_tokens <= 0 or not prompt_ids:
        return ids, "nothing to do", profiles
    pending = list(prompt_ids)
    while len(ids) < max_new_tokens:
        if session.length + len(pending) > session.max_seq_len:
            reason = "max_seq_len"
            break
        if sampler is None:
            row, prof = session.run(pending)
            token = sample_greedy(row, seen, repetition_penalty)
            seen.add(token)
        else:
            token, prof = session.run(pending, sampler)
        profiles.append(prof)
        if not _keep(token, ids, stop_ids, on_token):
            reason = "stop token"
            break
        pending = [token]
    return ids, reason, profiles


def generate_ids_pipelined(session: LlamaSession, prompt_ids: list, max_new_tokens: int,
                           stop_ids=(), on_token=None) -> tuple:
    """Greedy decoding with the argmax on the device and one step in flight: step t+1 is queued
    with step t's token still on the device, then token t is read (while t+1 runs) and checked
    for a stop. A step queued past a stop token is simply discarded. On a backend whose calls
    return computed arrays (NumPy, MLX: ``Backend.asynchronous`` is False) running ahead gains
    nothing and would hold each token back a step, so there each step is queued after reading
    the token before it. (Asking
    ``is_ready()`` instead cost the CUDA loop 0.19 ms a token on the H200, run CX: 0.975 against
    0.790 ms; a first call that captures a CUDA graph returns a computed token.)
    ``StepProfile.total`` is the time between two tokens reaching the host (the first: the
    prefill, TTFT)."""
    stop_ids = set(stop_ids)
    session.reset()
    ids: list = []
    profiles: list = []
    if max_new_tokens <= 0 or not prompt_ids:
        return ids, "nothing to do", profiles
    if session.length + len(prompt_ids) > session.max_seq_len:
        return ids, "max_seq_len", profiles
    t_prev = time.perf_counter()
    token = session.launch(list(prompt_ids))
    queued = time.perf_counter() - t_prev  # queueing the step that makes this token
    ahead = lf.get_backend(token.backend).asynchronous  # keep a step in flight where calls queue
    reason = "max_new_tokens"
    while True:
        t0 = time.perf_counter()
        room = session.length + 1 <= session.max_seq_len
        more = len(ids) + 1 < max_new_tokens
        nxt = session.launch(token) if more and room and ahead else None
        t1 = time.perf_counter()
        value = int(np.asarray(token).reshape(-1)[0])  # waits for the step that chose it
        t2 = time.perf_counter()
        profiles.append(StepProfile(total=t2 - t_prev, execute=queued + t1 - t0, logits=t2 - t1))
        t_prev = t2
        if not _keep(value, ids, stop_ids, on_token):
            reason = "stop token"
            break
        if len(ids) >= max_new_tokens:
            break
        if not room:
            reason = "max_seq_len"
            break
        queued = 0.0
        if nxt is None:  # not queued ahead: queue it now, fed the token read just now
            nxt = session.launch(token)
            queued = time.perf_counter() - t2
        token = nxt
    return ids, reason, profiles


def _keep(token: int, ids: list, stop_ids: set, on_token) -> bool:
    """Append a generated token (False, keeping nothing, for a stop token)."""
    if token in stop_ids:
        return False
    ids.append(token)
    if on_token is not None:
        on_token(token)
    return True


def ttft_tpot_ms(profiles: list) -> tuple:
    """TTFT: the prefill step; TPOT: the mean of the decode steps (as the seed reports them)."""
    if not profiles:
        return 0.0, 0.0
    decode = profiles[1:]
    tpot = 1e3 * sum(p.total for p in decode) / len(decode) if decode else 0.0
    return 1e3 * profiles[0].total, tpot


def compile_report(jitted) -> dict:
    """E-graph build and search figures of the jitted step's compiled graph (Lowered.stats() and
    Compiled.cost()); {} before the first call. ``egraph_built`` is False when every bucket came
    with its LLIR from the search cache (then there are no e-graph figures)."""
    stages = jitted.compiled()  # one per traced signature: one for this model
    if not stages:
        return {}
    compiled = stages[-1]
    out: dict = {}
    try:
        out["egraph_built"] = compiled.lowered.egraph_built
        if out["egraph_built"]:  # (stats() would build it: a cached start does without)
            st = compiled.lowered.stats()
            out.update(egraph_build_s=st["build_s"], eclasses=st["eclasses"], enodes=st["enodes"])
    except (AttributeError, KeyError, TypeError):
        pass
    try:
        cost = compiled.cost()
        if cost:
            out.update(search_s=sum(v.get("search_s", 0.0) for v in cost.values()), buckets=len(cost),
                       candidates=sum(v.get("candidates", 0) for v in cost.values()),
                       cached=sum(1 for v in cost.values() if v.get("cached")))
            stage_s: dict = {}  # where the searches' time went, summed over the buckets
            for v in cost.values():
                for name, seconds in v.get("stage_s", {}).items():
                    stage_s[name] = stage_s.get(name, 0.0) + seconds
            out["search_stage_s"] = stage_s
            # each bucket's timed candidates in order (seconds, or why one was dropped)
            out["search_timed"] = {b: v.get("timed", []) for b, v in cost.items() if not v.get("cached")}
            # candidates kept after their integer outputs (the greedy token) alone differed
            out["search_rechecked"] = sum(v.get("rechecked", 0) for v in cost.values())
    except (AttributeError, KeyError, TypeError):
        pass
    return out

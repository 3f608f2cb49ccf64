"""attention_rows for a long prompt's many query rows: lf_attn_tiles (kernels/attention_tiles.cu),
which backends/cuda/attentionkernels.py plans when a bucket's prompts reach TILES_MIN_S tokens.
On the CPU: the plan, and the kernel on the CPU emulation of CUDA (tests/cuda_model_emulation.py)
against float64; on a real GPU (marked ``gpu``): Llama-3.2-1B's heads at a 1000-token prompt.
The helpers (the traced Llama attention, its genome, the float64 reference) are
test_attention_rule.py's."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import luminal_fn as lf
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor

from test_attention_rule import (BUCKETS, DECODE, N_CACHE, attention_genome, close, decode_args, extractor, f32,
                                 gqa_config, llama_attention, model, ref_attention)


# name -> (heads, kv heads, head dim, the calls' (s, c)): G = 8, 4, 2, 1 (QS = 8, 16, 32, 64 positions
# a block of 64 rows); s = c = 40 with QS = 8 leaves a block's later key tile wholly masked
# (skipped). Heads over 64 (up to 128) take blocks of 32 rows over key tiles of 16.
TILED = {
    "tiles_16x2x24": (16, 2, 24, ((40, 40), (13, 40), (48, 64), (1, 1), (5, 64))),
    "tiles_8x2x32": (8, 2, 32, ((17, 17), (33, 64), (2, 2))),
    "tiles_4x2x64": (4, 2, 64, ((48, 48), (3, 64))),
    "tiles_3x3x16": (3, 3, 16, ((48, 60), (7, 7))),
    "tiles_8x2x128": (8, 2, 128, ((40, 40), (13, 64), (1, 1))),
    "tiles_4x4x96": (4, 4, 96, ((33, 33), (48, 64))),
}


def _geometry(heads, kv_heads, head_dim) -> tuple:
    """(QS, R, TK, EM) the planner should pick."""
    em, r, tk = (64, 64, 32) if head_dim <= 64 else (128, 32, 16)
    return r // (heads // kv_heads), r, tk, em


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: the emulation needs it")
@pytest.mark.parametrize("name", sorted(TILED))
def test_tiled_rows_on_the_cpu_emulation_compute_the_reference(name, tmp_path, monkeypatch):
    """A long prompt's rows (here: from a bucket top of 1 token): lf_attn_tiles takes 64 rows (32
    for heads over 64) that share a key/value head a block, the keys in tiles of 32 (16) with an
    online softmax; ragged S and C, heads zero-padded, the causal mask's wholly masked tiles
    skipped."""
    import cuda_model_emulation as emu
    from luminal_fn.backends.cuda import KERNEL_KINDS, attentionkernels
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import module_source, nvcc_available, nvcc_check

    monkeypatch.setattr(attentionkernels, "TILES_MIN_S", 1)
    monkeypatch.setitem(BUCKETS, "s", [(1, 1), (2, 48)])
    heads, kv_heads, head_dim, calls = TILED[name]
    config = gqa_config(heads, kv_heads, head_dim)
    ex = extractor(llama_attention(config), decode_args(config, *calls[0][::-1]), kinds=KERNEL_KINDS)
    ll = ex.extract(attention_genome(ex))
    bp = plan_graph(ll, {"s": 48, "c": N_CACHE})
    (step,) = [st for st in bp.steps if st.label == "attention_rows"]
    geometry = _geometry(heads, kv_heads, head_dim)
    assert step.source.meta["tiles"] == geometry and "lf_attn_tiles<" in step.source.text
    assert ", {}>(".format(", ".join(map(str, geometry))) in step.source.text and step.source.block == 128
    lib = emu.build_with_hand(bp, ("rms_norm.cu", "attention.cu", "attention_tiles.cu"), str(tmp_path))
    for s, c in calls:
        args = decode_args(config, c, s)
        got = emu.run(lib, bp, list(args), {"s": s, "c": c})[0]
        close(got, ref_attention(config, *args))
    if nvcc_available():
        nvcc_check(module_source(bp.kernels()))


def test_rows_are_tiled_only_for_long_prompts(monkeypatch):
    from luminal_fn.backends.cuda import KERNEL_KINDS, attentionkernels
    from luminal_fn.backends.cuda.executable import plan_graph

    config = gqa_config(8, 2, 32)
    ex = extractor(llama_attention(config), decode_args(config, 16, 16), kinds=KERNEL_KINDS)
    ll = ex.extract(attention_genome(ex))

    def tiles():
        (step,) = [st for st in plan_graph(ll, {"s": 16, "c": N_CACHE}).steps if st.label == "attention_rows"]
        return step.source.meta["tiles"]

    assert tiles() is None  # a bucket of prompts up to 16 tokens: one row a block
    monkeypatch.setattr(attentionkernels, "TILES_MIN_S", 16)
    assert tiles() == (16, 64, 32, 64)
    monkeypatch.setattr(attentionkernels, "TILES_MIN_S", 128)
    monkeypatch.setenv(attentionkernels.TILES_FROM_SWITCH, "16")  # the threshold from the environment
    assert tiles() == (16, 64, 32, 64)
    monkeypatch.setenv(attentionkernels.TILES_FROM_SWITCH, "17")
    assert tiles() is None
    monkeypatch.setenv(attentionkernels.TILES_FROM_SWITCH, "many")
    with pytest.raises(ValueError, match="LUMINAL_CUDA_ATTN_TILES_FROM='many'"):
        tiles()
    monkeypatch.setenv(attentionkernels.TILES_FROM_SWITCH, "16")
    monkeypatch.setenv(attentionkernels.TILES_SWITCH, "0")
    assert tiles() is None


@pytest.mark.gpu
@pytest.mark.parametrize("head_dim", [64, 128])
def test_tiled_prompt_rows_on_the_gpu_match_float64(head_dim):
    """Llama-3.2-1B's attention (heads of 64; of 128: Llama-3 8B's) for a prompt bucket of up to
    1024 tokens over a cache of 1536 rows: lf_attn_tiles (64 or 32 rows that share a key/value
    head a block, causal tiles skipped) matches float64 for a whole prompt, a prompt after a
    cached context, and one token."""
    from luminal_fn.backends import get_backend
    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph

    config, n = gqa_config(32, 8, head_dim), 1536

    def args(c, s):
        q = f32(s, config.q_dim)
        kc, vc = (f32(n, 8 * head_dim) for _ in range(2))
        return q, kc, vc, model.causal_mask(np.arange(c - s, c), c)

    buckets = {"s": [(1, 1), (2, 1024)], "c": [(1, n)]}
    graph = lf.jit(llama_attention(config), dynamic_axes=DECODE, buckets=buckets).trace(*args(40, 40)).hlir
    ex = Extractor(build_egraph(graph), graph, kernel_kinds=KERNEL_KINDS)
    ll = ex.extract(attention_genome(ex))
    (step,) = [st for st in plan_graph(ll, {"s": 1024, "c": n}).steps if st.label == "attention_rows"]
    assert step.source.meta["tiles"] == _geometry(32, 8, head_dim)  # (16, 64, 32, 64): 16 positions of 4 heads
    be = get_backend("cuda")
    exe = be.compile(ll)
    for s, c in ((1000, 1000), (333, 1200), (2, 2), (17, 1536), (127, 1100)):
        a = args(c, s)
        got = be.to_numpy(exe.run([be.from_numpy(x) for x in a], {"s": s, "c": c})[0])
        np.testing.assert_allclose(np.asarray(got, np.float64), ref_attention(config, *a),
                                   rtol=2e-5, atol=2e-5, err_msg=f"s={s} c={c}")

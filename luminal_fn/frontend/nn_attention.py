"""Rotary position embeddings (Llama/Hugging Face "rotate half" convention, Llama-3 frequency
scaling) and scaled dot-product attention with grouped-query heads and masks."""
from __future__ import annotations

import math

import numpy as np

from . import numpy as lnp
from .errors import DTypeError, ShapeError
from .nn_common import (as_array, fmt, public, require_float, same_dim, softmax_last, static,
                        upcast)

__all__: list = []
_public = public(__all__)


# ---- rope frequencies -------------------------------------------------------------------------------
def rope_inv_freq(head_dim, theta=10000.0, rope_scaling=None) -> np.ndarray:
    """The rotary inverse frequencies theta^(-2i/head_dim), i < head_dim/2, as a float32 NumPy
    array of shape (head_dim // 2,), computed on the host in float64.

    ``rope_scaling`` is a Hugging Face ``config.json`` ``rope_scaling`` dict, or None:
      * ``{"rope_type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
        "original_max_position_embeddings"}``: Llama 3.1/3.2 scaling. With wavelength
        w = 2*pi / f, low-frequency bands (w > original / low_freq_factor) are divided by
        ``factor``, high-frequency bands (w < original / high_freq_factor) are kept, and the bands
        between blend the two: s = (original / w - low) / (high - low), f' = (1 - s) f / factor + s f.
      * ``{"rope_type": "linear", "factor"}``: every frequency divided by ``factor``.
      * ``{"rope_type": "default"}`` (or None): no scaling.
    The older key ``"type"`` is accepted for ``"rope_type"``."""
    head_dim = int(head_dim)
    if head_dim <= 0 or head_dim % 2:
        raise ShapeError(f"nn.rope_inv_freq: head_dim must be a positive even number, got {head_dim}")
    inv = 1.0 / (float(theta) ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    if rope_scaling is None:
        return inv.astype(np.float32)
    if not isinstance(rope_scaling, dict):
        raise TypeError(f"nn.rope_inv_freq: rope_scaling must be a dict (config.json's "
                        f"rope_scaling) or None, got {type(rope_scaling).__name__}")
    kind = rope_scaling.get("rope_type", rope_scaling.get("type", "default"))

    def key(name):
        if name not in rope_scaling:
            raise ValueError(f"nn.rope_inv_freq: rope_scaling of type {kind!r} needs the key "
                             f"{name!r}; got keys {sorted(rope_scaling)}")
        return float(rope_scaling[name])

    if kind == "default":
        pass
    elif kind == "linear":
        inv = inv / key("factor")
    elif kind == "llama3":
        factor, low, high = key("factor"), key("low_freq_factor"), key("high_freq_factor")
        original = key("original_max_position_embeddings")
        if high <= low:
            raise ValueError(f"nn.rope_inv_freq: llama3 rope_scaling needs high_freq_factor > "
                             f"low_freq_factor, got {high} and {low}")
        wavelen = 2.0 * math.pi / inv
        smooth = (original / wavelen - low) / (high - low)
        blended = (1.0 - smooth) * inv / factor + smooth * inv
        inv = np.where(wavelen > original / low, inv / factor,
                       np.where(wavelen < original / high, inv, blended))
    else:
        raise ValueError(f"nn.rope_inv_freq: rope_scaling type {kind!r} is not supported "
                         "(default, linear, llama3)")
    return inv.astype(np.float32)


@_public
def rope_cos_sin(positions, head_dim, theta=10000.0, *, inv_freq=None, rope_scaling=None):
    """The rotary tables of Hugging Face's rotary embedding: positions (any shape, int or float)
    -> (cos, sin), each positions.shape + (head_dim,) float32, where the angle of band i is
    position * inv_freq[i] and the head_dim/2 bands repeat once (``cat(freqs, freqs)``).
    ``inv_freq`` (head_dim // 2,) overrides theta/rope_scaling (see :func:`rope_inv_freq`)."""
    pos = as_array(positions, "rope_cos_sin", "positions").astype(lnp.float32)
    if inv_freq is None:
        inv_freq = rope_inv_freq(head_dim, theta, rope_scaling)
    inv = as_array(inv_freq, "rope_cos_sin", "inv_freq").astype(lnp.float32)
    if inv.ndim != 1 or not same_dim(inv.shape[0], int(head_dim) // 2):
        raise ShapeError(f"nn.rope_cos_sin: inv_freq must have shape ({int(head_dim) // 2},) for "
                         f"head_dim {head_dim}, got {fmt(inv.shape)}")
    angles = lnp.expand_dims(pos, -1) * inv
    emb = lnp.concatenate([angles, angles], axis=-1)
    return lnp.cos(emb), lnp.sin(emb)


def _rotate_half(x):
    """(x1, x2) -> (-x2, x1) on the halves of the last axis."""
    h = x.shape[-1] // 2
    return lnp.concatenate([lnp.negative(x[..., h:]), x[..., :h]], axis=-1)


@_public
def rope(x, positions=None, theta=10000.0, *, seq_axis=-2, cos=None, sin=None, inv_freq=None,
         rope_scaling=None):
    """Rotary position embedding in the Llama / Hugging Face "rotate half" convention:
    ``x * cos + rotate_half(x) * sin``, where the first and second halves of head_dim form the
    rotated pairs (x[i], x[i + head_dim/2]).

    x: (..., seq, head_dim) with the default ``seq_axis=-2`` (e.g. (batch, heads, seq, head_dim)),
    or (seq, heads, head_dim) with ``seq_axis=0`` (any seq_axis <= -2 counted from the end, or
    its positive equivalent). positions: (seq,) ints or floats (default arange(seq)); extra
    leading dims broadcast against x's dims before the seq axis. The angles come from
    ``inv_freq`` (head_dim // 2,), or from theta and a Hugging Face ``rope_scaling`` dict
    (Llama-3 scaling, see :func:`rope_inv_freq`). Precomputed ``cos``/``sin`` of shape
    (..., seq, head_dim) (as :func:`rope_cos_sin` or Hugging Face return them) or
    (..., seq, head_dim // 2) replace all of that. Returns x's shape; the tables are cast to x's
    dtype (float32 angles, as Hugging Face)."""
    x = as_array(x, "rope", "x")
    require_float(x, "rope", "x")
    if x.ndim < 2:
        raise ShapeError(f"nn.rope: x must have a seq and a head_dim axis, got shape {fmt(x.shape)}")
    d = static(x.shape[-1], "rope", "head_dim")
    if d % 2:
        raise ShapeError(f"nn.rope: head_dim must be even, got x {fmt(x.shape)}")
    sa = seq_axis - x.ndim if seq_axis >= 0 else seq_axis
    if not -x.ndim <= sa <= -2:
        raise ShapeError(f"nn.rope: seq_axis {seq_axis} must name an axis before head_dim of x "
                         f"{fmt(x.shape)}")
    seq = x.shape[sa]
    if (cos is None) != (sin is None):
        raise ValueError("nn.rope: pass both cos and sin, or neither")
    if cos is None:
        if positions is None:
            positions = lnp.arange(seq)
        cos, sin = rope_cos_sin(positions, d, theta, inv_freq=inv_freq, rope_scaling=rope_scaling)
    else:
        cos, sin = as_array(cos, "rope", "cos"), as_array(sin, "rope", "sin")
        last = static(cos.shape[-1], "rope", "the last dim of cos") if cos.ndim else None
        if last not in (d, d // 2) or sin.ndim == 0 or not same_dim(last, sin.shape[-1]):
            raise ShapeError(f"nn.rope: cos {fmt(cos.shape)} and sin {fmt(sin.shape)} must end in "
                             f"head_dim ({d}) or head_dim // 2 ({d // 2})")
        if last == d // 2:
            cos = lnp.concatenate([cos, cos], axis=-1)
            sin = lnp.concatenate([sin, sin], axis=-1)
    if cos.ndim < 2 or not (same_dim(cos.shape[-2], seq) or same_dim(cos.shape[-2], 1)):
        raise ShapeError(f"nn.rope: the tables {fmt(cos.shape)} do not match the seq axis of x "
                         f"{fmt(x.shape)} (seq_axis {seq_axis}: {seq} positions)")
    # put the tables' seq axis under x's seq axis: size-1 axes for the dims in between
    between = (1,) * (-sa - 2)
    cos = lnp.reshape(cos, tuple(cos.shape[:-1]) + between + (d,)).astype(x.dtype)
    sin = lnp.reshape(sin, tuple(sin.shape[:-1]) + between + (d,)).astype(x.dtype)
    return x * cos + _rotate_half(x) * sin


# ---- attention --------------------------------------------------------------------------------------
@_public
def scaled_dot_product_attention(q, k, v, mask=None, scale=None, is_causal=False):
    """softmax(q @ k^T * scale + mask) @ v, PyTorch's ``F.scaled_dot_product_attention``.

    q (..., Hq, Lq, E), k (..., Hk, Lk, E), v (..., Hk, Lk, Ev) -> (..., Hq, Lq, Ev); 2-D
    (L, E) inputs work too. Grouped-query attention is automatic: when Hk divides Hq, query head
    h attends with key/value head h // (Hq // Hk) (PyTorch's ``enable_gqa``, HF's ``repeat_kv``);
    k and v are never repeated in memory. ``scale`` defaults to 1/sqrt(E).
    ``mask`` broadcasts to (..., Hq, Lq, Lk): a bool mask keeps positions where it is True; a
    float mask is added to the scores (0 / -inf, as the seed's causal mask over (s, c)).
    ``is_causal`` keeps key j for query i when j <= i (the top-left aligned lower triangle, as
    PyTorch; for a KV-cache step with Lq < Lk pass an explicit mask instead); it combines with
    ``mask``. A query whose keys are all masked gets NaN, as in PyTorch. Half-precision inputs
    run the softmax in float32."""
    fn = "scaled_dot_product_attention"
    q, k, v = (as_array(t, fn, n) for t, n in ((q, "q"), (k, "k"), (v, "v")))
    for t, n in ((q, "q"), (k, "k"), (v, "v")):
        require_float(t, fn, n)
    if not (q.ndim == k.ndim == v.ndim >= 2):
        raise ShapeError(f"nn.{fn}: q {fmt(q.shape)}, k {fmt(k.shape)} and v {fmt(v.shape)} must "
                         "have the same number of dims (at least 2: (..., L, E))")
    if not same_dim(q.shape[-1], k.shape[-1]):
        raise ShapeError(f"nn.{fn}: q {fmt(q.shape)} and k {fmt(k.shape)} differ in the embedding dim E")
    if not all(same_dim(a, b) for a, b in zip(k.shape[:-1], v.shape[:-1])):
        raise ShapeError(f"nn.{fn}: k {fmt(k.shape)} and v {fmt(v.shape)} must agree in every dim "
                         "but the last")
    groups = 1
    if q.ndim >= 3 and not same_dim(q.shape[-3], k.shape[-3]):
        hq = static(q.shape[-3], fn, "the query head count")
        hk = static(k.shape[-3], fn, "the key/value head count")
        if hq % hk:
            raise ShapeError(f"nn.{fn}: {hk} key/value heads (k {fmt(k.shape)}) do not divide "
                             f"{hq} query heads (q {fmt(q.shape)})")
        groups = hq // hk
    e = static(q.shape[-1], fn, "the embedding dim E") if scale is None else None
    scale = 1.0 / math.sqrt(e) if scale is None else scale
    lq, lk = q.shape[-2], k.shape[-2]
    kt = lnp.swapaxes(k, -1, -2)
    if groups > 1:
        # (..., Hk, G, Lq, E) against (..., Hk, 1, E, Lk): each group shares one key head
        batch, hk = tuple(q.shape[:-3]), k.shape[-3]
        qg = lnp.reshape(q, batch + (hk, groups, lq, q.shape[-1]))
        scores = lnp.matmul(qg, lnp.expand_dims(kt, -3))
        scores = lnp.reshape(scores, tuple(scores.shape[:-4]) + (hk * groups, lq, lk))
    else:
        scores = lnp.matmul(q, kt)
    scores = upcast(scores) * scale
    if mask is not None:
        m = as_array(mask, fn, "mask")
        if m.dtype.is_bool:
            scores = lnp.where(m, scores, -np.inf)
        elif m.dtype.is_float:
            scores = scores + m.astype(scores.dtype)
        else:
            raise DTypeError(f"nn.{fn}: mask must be bool (True = attend) or float (added to the "
                             f"scores), got dtype {m.dtype}")
    if is_causal:
        keep = lnp.arange(lq)[:, None] >= lnp.arange(lk)[None, :]
        scores = lnp.where(keep, scores, -np.inf)
    weights = softmax_last(scores, -1).astype(q.dtype)
    if groups > 1:
        wg = lnp.reshape(weights, tuple(weights.shape[:-3]) + (k.shape[-3], groups, lq, lk))
        out = lnp.matmul(wg, lnp.expand_dims(v, -3))
        return lnp.reshape(out, tuple(out.shape[:-4]) + (k.shape[-3] * groups, lq, v.shape[-1]))
    return lnp.matmul(weights, v)

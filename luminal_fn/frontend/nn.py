"""``luminal_fn.nn``: model helpers (linear, activations, softmax, norms, embeddings, row
gather/scatter, rope, attention, conv2d, upsampling), all plain ``luminal_fn.numpy`` code that
traces into primitive HLIR; the optimizer recognises the patterns (matmul, conv, embedding-bag...).

Conventions follow NumPy/PyTorch/JAX; each docstring gives the shapes. Called outside a jitted
function, every helper runs eagerly on the NumPy backend and returns a ``luminal_fn.Array``.
Attention and rope live in nn_attention.py, convolution and upsampling in nn_conv.py.
"""
from __future__ import annotations

import math

import numpy as np

from . import numpy as lnp
from .errors import ShapeError
from .nn_common import (as_array, fmt, public, require_float, require_int, require_ndim,
                        same_dim, softmax_last, static, upcast)
from .tracer import Tracer

__all__: list = []
_public = public(__all__)


# ---- linear ---------------------------------------------------------------------------------------
@_public
def linear(x, w, b=None):
    """``x @ w + b``: x (..., in), w (in, out), b (out,) -> (..., out).

    Note the weight layout is (in, out) as in JAX/Flax; a PyTorch ``nn.Linear`` weight is
    (out, in), so pass ``weight.T`` for it."""
    x, w, b = as_array(x, "linear", "x"), as_array(w, "linear", "w"), as_array(b, "linear", "b")
    if w.ndim != 2:
        raise ShapeError(f"nn.linear: w must be 2-D (in, out), got shape {fmt(w.shape)}")
    if x.ndim == 0 or not same_dim(x.shape[-1], w.shape[0]):
        raise ShapeError(f"nn.linear: x {fmt(x.shape)} does not fit w {fmt(w.shape)}: x's last dim "
                         f"must equal w's first (w is (in, out); transpose a PyTorch weight)")
    y = lnp.matmul(x, w)
    if b is not None:
        if b.ndim != 1 or not same_dim(b.shape[0], w.shape[1]):
            raise ShapeError(f"nn.linear: b must have shape ({w.shape[1]},), got {fmt(b.shape)}")
        y = y + b
    return y


# ---- activations ----------------------------------------------------------------------------------
@_public
def relu(x):
    """max(x, 0), elementwise; any shape."""
    return lnp.maximum(x, 0)


@_public
def sigmoid(x):
    """1 / (1 + exp(-x)), elementwise; saturates cleanly to 0 and 1."""
    return lnp.reciprocal(lnp.exp(lnp.negative(x)) + 1.0)


@_public
def silu(x):
    """x * sigmoid(x) (also called swish), elementwise."""
    x = lnp.asarray(x)
    return x * sigmoid(x)


@_public
def softplus(x):
    """log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|)) so it neither overflows nor
    loses small values (jax.nn.softplus)."""
    x = lnp.asarray(x)
    return lnp.maximum(x, 0.0) + lnp.log1p(lnp.exp(lnp.negative(lnp.abs(x))))


@_public
def leaky_relu(x, negative_slope=0.01):
    """x where x >= 0 else negative_slope * x, elementwise."""
    x = lnp.asarray(x)
    return lnp.where(x >= 0, x, x * negative_slope)


@_public
def elu(x, alpha=1.0):
    """x where x > 0 else alpha * (exp(x) - 1), elementwise (expm1 keeps small x accurate)."""
    x = lnp.asarray(x)
    return lnp.where(x > 0, x, lnp.expm1(x) * alpha)


def _erfc(z):
    """The complementary error function with a relative error below 1.2e-7 everywhere: the
    Chebyshev-fitted form erfc(|z|) = t * exp(-z^2 + P(t)), t = 1 / (1 + |z|/2) (Press et al.,
    Numerical Recipes, 6.2), mirrored by erfc(-z) = 2 - erfc(z). HLIR has no erf primitive."""
    a = lnp.abs(z)
    t = lnp.reciprocal(a * 0.5 + 1.0)
    coef = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
            -1.13520398, 1.48851587, -0.82215223, 0.17087277)
    poly = t * coef[-1]
    for c in reversed(coef[1:-1]):
        poly = (poly + c) * t
    poly = poly + coef[0]
    tail = t * lnp.exp(poly - a * a)
    return lnp.where(z >= 0, tail, 2.0 - tail)


_SQRT_HALF = 1.0 / math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@_public
def gelu(x, approximate="none"):
    """The Gaussian error linear unit, elementwise.

    ``approximate="none"`` (the default, as PyTorch; ``False`` too) is the exact form
    x * Phi(x) = x/2 * erfc(-x/sqrt(2)), with erfc from a rational-exponential approximation of
    relative error < 1.2e-7 (so it stays accurate in the far negative tail).
    ``approximate="tanh"`` (or ``True``, jax.nn.gelu's default) is
    x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), evaluated as x * sigmoid(2u), which is the
    same function without the cancellation of 1 + tanh(u) for negative u."""
    x = lnp.asarray(x)
    if approximate in ("tanh", True):
        u = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI
        return x * sigmoid(u * 2.0)
    if approximate in ("none", False, None):
        return x * _erfc(x * -_SQRT_HALF) * 0.5
    raise ValueError(f"nn.gelu: approximate must be 'none' or 'tanh' (or a bool), got {approximate!r}")


# ---- softmax ------------------------------------------------------------------------------------
@_public
def softmax(x, axis=-1):
    """exp(x - max) / sum(exp(x - max)) along ``axis`` (an int or a tuple); shape of x.
    float16/bfloat16 inputs are computed in float32 and cast back."""
    x = lnp.asarray(x)
    return softmax_last(upcast(x), axis).astype(x.dtype if x.dtype.is_float else lnp.float32)


@_public
def log_softmax(x, axis=-1):
    """x - logsumexp(x) along ``axis`` (an int or a tuple), computed stably; shape of x."""
    x = lnp.asarray(x)
    xf = upcast(x)
    shifted = xf - lnp.max(xf, axis=axis, keepdims=True)
    out = shifted - lnp.log(lnp.sum(lnp.exp(shifted), axis=axis, keepdims=True))
    return out.astype(x.dtype if x.dtype.is_float else lnp.float32)


# ---- normalisation --------------------------------------------------------------------------------
def _norm_axes(axis, ndim: int, fn: str) -> tuple:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"nn.{fn}: axis {a} is out of bounds for an input of {ndim} dims")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ShapeError(f"nn.{fn}: repeated axis in {axis}")
    return tuple(sorted(out))


def _affine_param(p, x_shape, axes, fn: str, what: str):
    """A weight/bias laid over the normalised axes: its dims are those of x at ``axes``, and it
    is reshaped so that it broadcasts against x."""
    want = tuple(x_shape[a] for a in axes)
    if p.ndim != len(axes) or not all(same_dim(a, b) for a, b in zip(p.shape, want)):
        raise ShapeError(f"nn.{fn}: {what} must have shape {fmt(want)} (the normalised dims of x "
                         f"{fmt(x_shape)}), got {fmt(p.shape)}")
    shape = tuple(x_shape[i] if i in axes else 1 for i in range(axes[0], len(x_shape)))
    return lnp.reshape(p, shape)


@_public
def layer_norm(x, weight=None, bias=None, eps=1e-5, axis=-1):
    """(x - mean) / sqrt(var + eps) * weight + bias over ``axis`` (an int or a tuple of axes; the
    biased variance, as PyTorch). x any shape; weight and bias have the shape of the normalised
    dims. float16/bfloat16 are normalised in float32 and cast back before the affine part."""
    x = as_array(x, "layer_norm", "x")
    require_float(x, "layer_norm", "x")
    axes = _norm_axes(axis, x.ndim, "layer_norm")
    xf = upcast(x)
    mean = lnp.mean(xf, axis=axes, keepdims=True)
    xc = xf - mean
    var = lnp.mean(xc * xc, axis=axes, keepdims=True)
    y = (xc * lnp.rsqrt(var + eps)).astype(x.dtype)
    if weight is not None:
        y = y * _affine_param(as_array(weight, "layer_norm", "weight"), x.shape, axes, "layer_norm", "weight")
    if bias is not None:
        y = y + _affine_param(as_array(bias, "layer_norm", "bias"), x.shape, axes, "layer_norm", "bias")
    return y


@_public
def rms_norm(x, weight=None, eps=1e-6, axis=-1):
    """x / sqrt(mean(x^2) + eps) * weight over ``axis`` (Llama's RMSNorm). x any shape; weight
    has the shape of the normalised dims. float16/bfloat16 are normalised in float32 and cast
    back to x's dtype before the weight multiplies, as Hugging Face's LlamaRMSNorm does."""
    x = as_array(x, "rms_norm", "x")
    require_float(x, "rms_norm", "x")
    axes = _norm_axes(axis, x.ndim, "rms_norm")
    xf = upcast(x)
    ms = lnp.mean(xf * xf, axis=axes, keepdims=True)
    y = (xf * lnp.rsqrt(ms + eps)).astype(x.dtype)
    if weight is not None:
        y = y * _affine_param(as_array(weight, "rms_norm", "weight"), x.shape, axes, "rms_norm", "weight")
    return y


@_public
def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """PyTorch's GroupNorm: x (N, C, *spatial) split into ``num_groups`` groups of C/num_groups
    channels, each normalised over its channels and spatial positions (biased variance), then
    ``* weight[c] + bias[c]`` per channel; weight and bias have shape (C,). Returns x's shape.
    For an unbatched (C, H, W) tensor pass ``x[None]``."""
    x = as_array(x, "group_norm", "x")
    require_float(x, "group_norm", "x")
    if x.ndim < 2:
        raise ShapeError(f"nn.group_norm: x must be (N, C, *spatial), got shape {fmt(x.shape)}")
    n, c = x.shape[0], static(x.shape[1], "group_norm", "the channel dim")
    g = int(num_groups)
    if g <= 0 or c % g:
        raise ShapeError(f"nn.group_norm: {c} channels (x {fmt(x.shape)}) cannot be split into "
                         f"{num_groups} equal groups")
    per_group = c // g
    for d in x.shape[2:]:
        per_group = per_group * d
    xf = upcast(x)
    xg = lnp.reshape(xf, (n, g, per_group))
    mean = lnp.mean(xg, axis=-1, keepdims=True)
    xc = xg - mean
    var = lnp.mean(xc * xc, axis=-1, keepdims=True)
    y = lnp.reshape((xc * lnp.rsqrt(var + eps)).astype(x.dtype), x.shape)
    per_channel = (c,) + (1,) * (x.ndim - 2)
    for p, what in ((weight, "weight"), (bias, "bias")):
        if p is None:
            continue
        p = as_array(p, "group_norm", what)
        if p.ndim != 1 or not same_dim(p.shape[0], c):
            raise ShapeError(f"nn.group_norm: {what} must have shape ({c},), got {fmt(p.shape)}")
        p = lnp.reshape(p, per_channel)
        y = y * p if what == "weight" else y + p
    return y


# ---- embeddings and row gather/scatter --------------------------------------------------------------
def _table(table, fn: str):
    table = as_array(table, fn, "table")
    require_ndim(table, (2,), fn, "table", "2-D (rows, dim)")
    return table


def _indices(idx, fn: str, what: str = "indices"):
    if isinstance(idx, (list, tuple)) and not any(isinstance(i, Tracer) for i in idx):
        idx = np.asarray(idx, dtype=np.int32)
    idx = as_array(idx, fn, what)
    require_int(idx, fn, what)
    return idx


@_public
def gather_rows(table, idx):
    """Rows of a 2-D table: table (R, D), idx int32 of any shape -> idx.shape + (D,).

    The KV-cache read of the seed (``gather_rows(cache, gather_idx)``). Negative indices count
    from the end as in NumPy; an index out of range reads a clamped row (the Gather primitive
    clamps; like JAX, out-of-bounds reads are not checked at run time)."""
    table = _table(table, "gather_rows")
    idx = _indices(idx, "gather_rows", "idx")
    return lnp.take(table, idx, axis=0)


@_public
def scatter_rows(dest, idx, rows):
    """A functional row write: a copy of dest (R, D) with ``dest[idx[i]] = rows[i]``; idx int32
    (n,) (or any shape), rows idx.shape + (D,) (or broadcastable to it). Returns the new (R, D)
    table; dest itself is unchanged (donate it to jit to update it in place on the device).

    The KV-cache write of the seed. Negative indices count from the end; out-of-range indices
    are dropped; with duplicate indices one of the rows wins (unspecified which, as in JAX)."""
    dest = _table(dest, "scatter_rows")
    idx = _indices(idx, "scatter_rows", "idx")
    rows = as_array(rows, "scatter_rows", "rows")
    want = tuple(idx.shape) + (dest.shape[1],)
    try:
        got = lnp.broadcast_shapes(tuple(rows.shape), want)
        ok = len(got) == len(want) and all(same_dim(a, b) for a, b in zip(got, want))
    except ShapeError:
        ok = False
    if not ok:
        raise ShapeError(f"nn.scatter_rows: rows {fmt(rows.shape)} do not fit idx {fmt(idx.shape)} "
                         f"into dest {fmt(dest.shape)}: rows must be idx.shape + (D,) = {fmt(want)}")
    return dest.at[idx].set(rows)


@_public
def embedding(table, ids):
    """Embedding lookup: table (V, D), ids int32 of any shape -> ids.shape + (D,)."""
    return gather_rows(table, ids)


@_public
def embedding_bag(table, indices, offsets=None, mode="sum", per_sample_weights=None,
                  include_last_offset=False):
    """Sums (``mode="sum"``), means or maxima of fixed-size bags of table rows, like PyTorch's
    ``F.embedding_bag``: table (V, D) and either indices (B, L) with offsets None, or 1-D indices
    (B*L,) with offsets (B,) (or (B+1,) with include_last_offset) that must be equally spaced
    (bag b is indices[b*L:(b+1)*L]); returns (B, D).

    Traces to gather rows -> reshape (B, L, D) -> reduce over L, the pattern the optimizer turns
    into one embedding-bag kernel. Offsets must be concrete (a list, tuple or NumPy array) so the
    bag size is known at trace time; variable bag sizes and per_sample_weights are not supported."""
    fn = "embedding_bag"
    table = _table(table, fn)
    if per_sample_weights is not None:
        raise ValueError("nn.embedding_bag: per_sample_weights is not supported (bags are plain "
                         "sums/means/maxima); multiply the gathered rows yourself with "
                         "gather_rows(table, indices) * weights[..., None] and sum over the bag axis")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"nn.embedding_bag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    indices = _indices(indices, fn)
    if indices.ndim == 2:
        if offsets is not None:
            raise ShapeError(f"nn.embedding_bag: with 2-D indices {fmt(indices.shape)} (one bag "
                             "per row) offsets must be None")
        bags, size = indices.shape
    elif indices.ndim == 1:
        bags, size = _fixed_bags(indices, offsets, include_last_offset)
    else:
        raise ShapeError(f"nn.embedding_bag: indices must be (B, L), or 1-D with offsets, got "
                         f"shape {fmt(indices.shape)}")
    if same_dim(size, 0):
        raise ShapeError("nn.embedding_bag: empty bags (bag size 0) are not supported")
    flat = lnp.reshape(indices, (bags * size,))
    rows = lnp.reshape(gather_rows(table, flat), (bags, size, table.shape[1]))
    if mode == "max":
        return lnp.max(rows, axis=1)
    total = lnp.sum(rows, axis=1)
    return total * (1.0 / size) if mode == "mean" else total


def _fixed_bags(indices, offsets, include_last_offset):
    if offsets is None:
        raise ShapeError(f"nn.embedding_bag: 1-D indices {fmt(indices.shape)} need offsets "
                         "(or pass indices of shape (B, L))")
    if isinstance(offsets, Tracer):
        raise ShapeError("nn.embedding_bag: offsets is a traced array, so the bag size is unknown "
                         "while tracing; pass offsets as a tuple (a static argument) or NumPy "
                         "array captured by the function, or pass indices reshaped to (B, L)")
    offs = np.asarray(offsets).astype(np.int64).reshape(-1)
    n = static(indices.shape[0], "embedding_bag", "the length of 1-D indices")
    if include_last_offset:
        if offs.size == 0 or offs[-1] != n:
            raise ShapeError(f"nn.embedding_bag: with include_last_offset the last offset must be "
                             f"len(indices) = {n}, got {offs[-1:].tolist()}")
        offs = offs[:-1]
    b = offs.size
    if b == 0 or n % b or offs[0] != 0 or not np.array_equal(offs, np.arange(b) * (n // b)):
        raise ShapeError(f"nn.embedding_bag: offsets {offs.tolist()[:8]}{'...' if b > 8 else ''} "
                         f"over {n} indices do not describe equal bags starting at 0; only fixed "
                         "bag sizes are supported (pad the bags to one size, or pass (B, L) indices)")
    return b, n // b


# ---- attention, rope, conv (own modules) ------------------------------------------------------------
from .nn_attention import (__all__ as _attn_all, rope, rope_cos_sin, rope_inv_freq,  # noqa: E402,F401
                           scaled_dot_product_attention)
from .nn_conv import __all__ as _conv_all, conv2d, nearest_upsample_2x, upsample_nearest  # noqa: E402,F401

from .nn_models import __all__ as _models_all, dlrm_interaction, pairwise_dot  # noqa: E402,F401

__all__ += _attn_all + _conv_all + _models_all

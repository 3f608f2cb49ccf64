"""2-D convolution as pad + unfold + matmul, and nearest-neighbour upsampling as a broadcast view.

conv2d traces to exactly the pattern the optimizer's conv rule matches (issue 7, after the seed's
``conv2d_bias``): zero pad -> unfold H and W -> patches (H_out*W_out, C_in*kH*kW) -> matmul with
weight.T -> (C_out, H_out, W_out) -> + bias; a 1x1 conv skips the unfold and is a transposed
matmul. The rule then runs a direct kernel that never materialises the patch matrix.
"""
from __future__ import annotations

from . import numpy as lnp
from .errors import ShapeError
from .nn_common import as_array, fmt, public, require_float, same_dim, static

__all__: list = []
_public = public(__all__)


def _pair(v, fn: str, what: str) -> tuple:
    if isinstance(v, int):
        v = (v, v)
    v = tuple(int(a) for a in v)
    if len(v) != 2 or min(v) < 1:
        raise ShapeError(f"nn.{fn}: {what} must be a positive int or a pair of them, got {v}")
    return v


def _conv_padding(padding, kernel, dilation, stride) -> tuple:
    """((top, bottom), (left, right)) from an int, a pair, a pair of pairs, "valid" or "same"."""
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        if stride != (1, 1):
            raise ShapeError(f"nn.conv2d: padding='same' needs stride 1 (as in PyTorch), got {stride}")
        out = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            out.append((total // 2, total - total // 2))  # the extra row goes after, as PyTorch
        return tuple(out)
    if isinstance(padding, int):
        padding = (padding, padding)
    pads = tuple((p, p) if isinstance(p, int) else tuple(p) for p in padding)
    if len(pads) != 2 or any(len(p) != 2 or min(p) < 0 for p in pads):
        raise ShapeError(f"nn.conv2d: padding must be an int, (pad_h, pad_w), ((top, bottom), "
                         f"(left, right)), 'valid' or 'same', got {padding!r}")
    return pads


@_public
def conv2d(x, w, b=None, stride=1, padding=0, dilation=1):
    """2-D cross-correlation, PyTorch's ``F.conv2d``: x (N, C_in, H, W) or unbatched
    (C_in, H, W), w (C_out, C_in, kH, kW), b (C_out,) -> (N, C_out, H_out, W_out) (or
    (C_out, H_out, W_out)) with H_out = (H + pad_top + pad_bottom - dilation*(kH-1) - 1) // stride + 1.

    stride and dilation: an int or (h, w); padding: an int, (pad_h, pad_w), ((top, bottom),
    (left, right)), "valid" or "same" (stride 1). Zero padding. groups are not supported."""
    x, w, b = (as_array(t, "conv2d", n) for t, n in ((x, "x"), (w, "w"), (b, "b")))
    require_float(x, "conv2d", "x")
    if x.ndim not in (3, 4) or w.ndim != 4:
        raise ShapeError(f"nn.conv2d: x must be (N, C_in, H, W) or (C_in, H, W) and w "
                         f"(C_out, C_in, kH, kW); got x {fmt(x.shape)} and w {fmt(w.shape)}")
    lead = tuple(x.shape[:-3])  # () or (N,)
    nl = len(lead)
    c_in, h, wd = x.shape[-3:]
    c_out, wc, kh, kw = (static(d, "conv2d", "the weight shape") for d in w.shape)
    if not same_dim(c_in, wc):
        raise ShapeError(f"nn.conv2d: x {fmt(x.shape)} has {c_in} input channels but w "
                         f"{fmt(w.shape)} expects {wc} (w is (C_out, C_in, kH, kW); groups are "
                         "not supported)")
    if b is not None and (b.ndim != 1 or not same_dim(b.shape[0], c_out)):
        raise ShapeError(f"nn.conv2d: b must have shape ({c_out},), got {fmt(b.shape)}")
    stride, dilation = _pair(stride, "conv2d", "stride"), _pair(dilation, "conv2d", "dilation")
    (pt, pb), (pl, pr) = _conv_padding(padding, (kh, kw), dilation, stride)
    for n, p, k, d, s, what in ((h, pt + pb, kh, dilation[0], stride[0], "height"),
                                (wd, pl + pr, kw, dilation[1], stride[1], "width")):
        if isinstance(n, int) and n + p < d * (k - 1) + 1:
            raise ShapeError(f"nn.conv2d: the padded input {what} {n + p} (x {fmt(x.shape)}, "
                             f"padding {padding!r}) is smaller than the dilated kernel "
                             f"{d * (k - 1) + 1} (w {fmt(w.shape)}, dilation {d})")
    wm = lnp.reshape(w, (c_out, c_in * kh * kw))
    if (kh, kw) == (1, 1) and stride == (1, 1) and pt + pb + pl + pr == 0:
        # 1x1: (.., C, H, W) -> (.., H*W, C), no unfold
        h_out, w_out = h, wd
        patches = lnp.reshape(lnp.moveaxis(x, -3, -1), lead + (h * wd, c_in))
    else:
        xp = x
        if pt + pb + pl + pr:
            xp = lnp.pad(x, ((0, 0),) * nl + ((0, 0), (pt, pb), (pl, pr)))
        u = lnp.unfold(xp, nl + 1, kh, stride[0], dilation[0])  # (.., C, H_out, kH, Wp)
        u = lnp.unfold(u, nl + 3, kw, stride[1], dilation[1])  # (.., C, H_out, kH, W_out, kW)
        h_out, w_out = u.shape[nl + 1], u.shape[nl + 3]
        order = tuple(range(nl)) + tuple(nl + a for a in (1, 3, 0, 2, 4))
        patches = lnp.reshape(lnp.transpose(u, order), lead + (h_out * w_out, c_in * kh * kw))
    out = lnp.matmul(patches, wm.T)  # (.., H_out*W_out, C_out)
    out = lnp.reshape(out, lead + (h_out, w_out, c_out))
    out = lnp.transpose(out, tuple(range(nl)) + (nl + 2, nl, nl + 1))  # (.., C_out, H_out, W_out)
    if b is not None:
        out = out + lnp.reshape(b, (c_out, 1, 1))
    return out


@_public
def upsample_nearest(x, scale=2):
    """Nearest-neighbour upsampling of the last two axes: x (..., H, W) (NCHW or CHW) ->
    (..., H*sh, W*sw), each pixel repeated sh x sw times; ``scale`` an int or (sh, sw).
    A broadcast view (..., H, 1, W, 1) -> (..., H, sh, W, sw) reshaped, the seed's pattern."""
    x = as_array(x, "upsample_nearest", "x")
    if x.ndim < 2:
        raise ShapeError(f"nn.upsample_nearest: x must have at least 2 dims (..., H, W), got {fmt(x.shape)}")
    sh, sw = _pair(scale, "upsample_nearest", "scale")
    lead, h, w = tuple(x.shape[:-2]), x.shape[-2], x.shape[-1]
    v = lnp.reshape(x, lead + (h, 1, w, 1))
    v = lnp.broadcast_to(v, lead + (h, sh, w, sw))
    return lnp.reshape(v, lead + (h * sh, w * sw))


@_public
def nearest_upsample_2x(x):
    """``upsample_nearest(x, 2)``: (..., H, W) -> (..., 2H, 2W) (the seed's VAE helper)."""
    return upsample_nearest(x, 2)

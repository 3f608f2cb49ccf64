"""The hand-written Metal model kernels of ``kernels/*.metal``, hosted by ``mx.fast.metal_kernel``
(the Metal path of the MLX backend, used when ``mx.metal.is_available()``).

kind                  source                   one launch per
embedding_bag         embedding_bag.metal      node; grid (D, B, 1) threads
embedding_bag_multi   embedding_bag.metal      table (K launches), then the prefix and the K (B, D)
                                               results concatenated by MLX
embedding_bag_multi_raw  as embedding_bag_multi, each table's raw rows normalised by MLX ops with
                                               its row-count input first (no host read)
dlrm_interact         dlrm_interact.metal      node; grid (P, B, 1) threads, P = F(F-1)/2
conv2d_bias           conv2d.metal             node; grid (W_out, H_out, N*C_out) threads

The sources are bodies: MLX writes the signature from the input names (``table``, ``rows``, ...,
``params``) and the output ``out``, and adds ``thread_position_in_grid`` because the body names
it. Each input is read through its view with MLX ops and made row-major by
``ensure_row_contiguous=True``; float inputs are passed as float32 and the float32 result is
rounded to the node's dtype, so float16/bfloat16 nodes match the reference (float32
accumulation, rounded when stored). Integer and bool nodes, and linear_bias / matmul_t (which
``mx.matmul`` already runs on the GPU), stay on the MLX-ops kernels of model_kernels.py. Indices
are 32-bit in the kernels (as the sources are written): tensors past 2**31 elements are not
supported there.
"""
from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx

from ..render.files import kernel_file
from .model_kernels import bag_params, multi_inputs, params_of, raw_tables
from .ops import cast

F32, I32 = mx.float32, mx.int32


@dataclass
class HandKernel:
    """A ``kernels/*.metal`` body as ``mx.fast.metal_kernel`` takes it (the attributes
    metal_host.MetalKernels reads: name, kind, input_names, body, header)."""

    name: str
    source_file: str
    input_names: list
    body: str = ""
    header: str = ""
    kind: str = "hand"

    def full_source(self) -> str:
        sig = ", ".join(self.input_names + ["out"])
        return f"// kernel {self.name}({sig}) from kernels/{self.source_file}; body hosted by " \
               f"mx.fast.metal_kernel\n{self.body}\n"


_SPECS = {  # kernel source -> input names, in the order the body reads them
    "embedding_bag": ("embedding_bag.metal", ["table", "rows", "row_stride", "params"]),
    "dlrm_interact": ("dlrm_interact.metal", ["t", "params"]),
    "conv2d_bias": ("conv2d.metal", ["x", "w", "bias", "params"]),
}
HAND_KINDS = ("embedding_bag", "embedding_bag_multi", "embedding_bag_multi_raw", "dlrm_interact", "conv2d_bias")
_CACHE: dict = {}


def hand_kernel(source: str) -> HandKernel:
    """The hosted kernel for a key of ``_SPECS`` (its body read from the shipped .metal file)."""
    hk = _CACHE.get(source)
    if hk is None:
        fname, names = _SPECS[source]
        hk = _CACHE[source] = HandKernel(f"lf_hand_{source}", fname, list(names),
                                         kernel_file(fname))
    return hk


def _ints(values) -> mx.array:
    return mx.array([int(v) for v in values], I32)


def _nonempty(x):
    """Metal cannot bind an empty buffer: a 1-element stand-in that the kernel never reads."""
    return x if x.size else mx.zeros((1,), x.dtype)


def launch_bag(kernel, table, rows, stride, b: int, l: int, d: int, n_rows: int = 0):
    """(B, D) float32 bag sums of one table through embedding_bag.metal (``n_rows`` > 0: the
    rows are raw lnp.take indices the kernel normalises into that many rows)."""
    table = table.reshape(-1).astype(F32)
    n = table.size
    if b * d == 0 or n == 0:  # an empty table sums to zeros (the NumPy kernel's rule)
        return mx.zeros((b, d), F32)
    rows = _nonempty(rows.reshape(-1)[: b * l].astype(I32))
    stride = stride.reshape(-1)[:1].astype(I32)
    (out,) = kernel(inputs=[table, rows, stride, _ints((b, l, d, n, n_rows))], output_shapes=[(b * d,)],
                    output_dtypes=[F32], grid=(d, b, 1), threadgroup=(min(d, 256), 1, 1))
    return out.reshape(b, d)


def launch_dlrm(kernel, t, b: int, f: int, d: int):
    """(B, F(F-1)/2) float32 pairwise dots through dlrm_interact.metal."""
    p = f * (f - 1) // 2
    if b * p == 0:
        return mx.zeros((b, p), F32)
    t = _nonempty(t.astype(F32).reshape(-1))
    (out,) = kernel(inputs=[t, _ints((b, f, d))], output_shapes=[(b * p,)], output_dtypes=[F32],
                    grid=(p, b, 1), threadgroup=(min(p, 256), 1, 1))
    return out.reshape(b, p)


def launch_conv(kernel, x, w, bias, prm: list):
    """(N, C_out, H_out, W_out) float32 direct conv of x (N, C, H, W) through conv2d.metal."""
    kh, kw, sh, sw, dh, dw, pt, pl, ho, wo = prm
    n, c, h, wd = x.shape
    co = w.shape[0]
    if n * co * ho * wo == 0:
        return mx.zeros((n, co, ho, wo), F32)
    ins = [_nonempty(a.astype(F32).reshape(-1)) for a in (x, w, bias)]
    params = _ints((n, c, h, wd, co, kh, kw, sh, sw, dh, dw, pt, pl, ho, wo))
    (out,) = kernel(inputs=ins + [params], output_shapes=[(n * co * ho * wo,)], output_dtypes=[F32],
                    grid=(wo, ho, n * co), threadgroup=(min(wo, 16), min(ho, 16), 1))
    return out.reshape(n, co, ho, wo)


def hand_step(node, name: str, readers: list, compiled):
    """(step, HandKernel) running the node through its .metal kernel, or None when the node has
    none (another kind, or not a float node). ``compiled(hk)`` gives the metal_kernel object."""
    if name not in HAND_KINDS or not node.dtype.is_float:
        return None
    d = node.dtype
    if name in ("embedding_bag", "embedding_bag_multi", "embedding_bag_multi_raw"):
        hk = hand_kernel("embedding_bag")
        kernel = compiled(hk)
        if name == "embedding_bag":
            r_table, r_rows, r_stride = readers

            def step(vals, dims):
                (b, l, dd), (nr,) = bag_params(node, dims, "embedding_bag", 3, 1)
                return cast(launch_bag(kernel, r_table(vals, dims), r_rows(vals, dims),
                                       r_stride(vals, dims), b, l, dd, nr), d)
        elif name == "embedding_bag_multi_raw":
            def step(vals, dims):
                b, p, k, l, dd = params_of(node, dims)[:5]
                prefix, tables = raw_tables(node, readers, vals, dims, p, k)
                parts = [] if prefix is None else [prefix(vals, dims).astype(F32)]
                for table, rows, stride in tables:
                    parts.append(mx.expand_dims(launch_bag(kernel, table, rows, stride, b, l, dd), 1))
                return cast(mx.concatenate(parts, axis=1), d)
        else:
            def step(vals, dims):
                b, p, k, l, dd = params_of(node, dims)[:5]
                _, nrs = bag_params(node, dims, "embedding_bag_multi", 5, k)
                prefix, tables = multi_inputs(node, readers, p, k)
                parts = [] if prefix is None else [prefix(vals, dims).astype(F32)]
                for (r_table, r_rows, r_stride), nr in zip(tables, nrs):
                    bags = launch_bag(kernel, r_table(vals, dims), r_rows(vals, dims),
                                      r_stride(vals, dims), b, l, dd, nr)
                    parts.append(mx.expand_dims(bags, 1))
                return cast(mx.concatenate(parts, axis=1), d)
        return step, hk
    if name == "dlrm_interact":
        hk = hand_kernel("dlrm_interact")
        kernel = compiled(hk)
        (r_t,) = readers

        def step(vals, dims):
            b, f, dd = params_of(node, dims)
            return cast(launch_dlrm(kernel, r_t(vals, dims), b, f, dd), d)

        return step, hk
    hk = hand_kernel("conv2d_bias")
    kernel = compiled(hk)
    r_x, r_w, r_b = readers

    def step(vals, dims):
        x = r_x(vals, dims)
        batched = x.ndim == 4
        out = launch_conv(kernel, x if batched else mx.expand_dims(x, 0), r_w(vals, dims), r_b(vals, dims),
                          params_of(node, dims))
        return cast(out if batched else out[0], d)

    return step, hk


__all__ = ["HandKernel", "HAND_KINDS", "hand_kernel", "hand_step", "launch_bag", "launch_dlrm",
           "launch_conv"]

"""Recommendation-model helpers (DLRM): the pairwise feature interaction.

``pairwise_dot`` traces to plain HLIR that the optimizer's ``dlrm_interact`` rule
(optimize/rules/models.egg) recognises: stack the F features into T (B, F, D), Z = T @ T^T, then
the strict lower triangle of Z written as a concatenation of the row slices Z[:, i, :i] for
i = 1..F-1. The slices are views, so the triangle is visible in the e-graph as view offsets and
masks (the rule checks every slice's row, width and position), where a gather with a constant
index array (``Z[:, li, lj]``) would hide the indices in a literal the rules cannot read.
"""
from __future__ import annotations

from . import numpy as lnp
from .errors import ShapeError
from .nn_common import as_array, fmt, public, require_float, same_dim, static
from .tracer import Tracer

__all__: list = []
_public = public(__all__)


def _features(features, fn: str):
    """A list of F (B, D) arrays, or a (B, F, D) array split into F of them."""
    if isinstance(features, (list, tuple)):
        feats = [as_array(f, fn, f"features[{k}]") for k, f in enumerate(features)]
    else:
        t = as_array(features, fn, "features")
        if t.ndim != 3:
            raise ShapeError(f"nn.{fn}: features must be a list of (B, D) arrays or one (B, F, D) "
                             f"array, got shape {fmt(t.shape)}")
        feats = [t[:, k, :] for k in range(static(t.shape[1], fn, "the feature count F"))]
    if len(feats) < 2:
        raise ShapeError(f"nn.{fn}: needs at least 2 features to pair, got {len(feats)}")
    b, d = None, None
    for k, f in enumerate(feats):
        require_float(f, fn, f"features[{k}]")
        if f.ndim != 2 or (b is not None and not (same_dim(f.shape[0], b) and same_dim(f.shape[1], d))):
            raise ShapeError(f"nn.{fn}: every feature must be (B, D) with one B and D; features[{k}] "
                             f"has shape {fmt(f.shape)}" + (f", features[0] {fmt(feats[0].shape)}"
                                                           if b is not None else ""))
        b, d = f.shape
    return feats


@_public
def pairwise_dot(features):
    """DLRM's dot interaction: the dot products of every pair of F features, one row per sample.

    ``features``: a list of F >= 2 arrays (B, D) (or one (B, F, D) array). Returns (B, F*(F-1)/2)
    with column p holding dot(features[i], features[j]) for the p-th pair (i, j), i > j, in the
    order of ``numpy.tril_indices(F, -1)``: (1, 0), (2, 0), (2, 1), (3, 0), ...

    Written as stack -> T @ T^T -> strict lower triangle (as row slices), the pattern the
    optimizer turns into one kernel that computes only the F*(F-1)/2 products. With F == 2 it
    is the single dot product ``sum(f0 * f1, axis=-1, keepdims=True)``."""
    feats = _features(features, "pairwise_dot")
    f = len(feats)
    if f == 2:
        return lnp.sum(feats[0] * feats[1], axis=-1, keepdims=True)
    t = lnp.stack(feats, axis=1)  # (B, F, D)
    z = lnp.matmul(t, lnp.transpose(t, (0, 2, 1)))  # (B, F, F)
    return lnp.concatenate([z[:, i, :i] for i in range(1, f)], axis=1)


@_public
def dlrm_interaction(dense, sparse):
    """The DLRMv1 interaction layer: ``concatenate([dense, pairwise_dot([dense] + sparse)], 1)``.

    dense (B, D) is the bottom MLP's output, ``sparse`` a list of (B, D) embedding-bag outputs
    (or one (B, K, D) array); returns (B, D + F*(F-1)/2) with F = 1 + len(sparse)."""
    dense = as_array(dense, "dlrm_interaction", "dense")
    if isinstance(sparse, (list, tuple)):
        sparse = list(sparse)
    elif isinstance(sparse, Tracer) or hasattr(sparse, "shape"):
        s = as_array(sparse, "dlrm_interaction", "sparse")
        if s.ndim != 3:
            raise ShapeError(f"nn.dlrm_interaction: sparse must be a list of (B, D) arrays or one "
                             f"(B, K, D) array, got shape {fmt(s.shape)}")
        sparse = [s[:, k, :] for k in range(static(s.shape[1], "dlrm_interaction", "K"))]
    else:
        raise TypeError(f"nn.dlrm_interaction: sparse must be a list of arrays or an array, got "
                        f"{type(sparse).__name__}")
    return lnp.concatenate([dense, pairwise_dot([dense] + sparse)], axis=1)

"""Comparing a candidate's output with a kept reference output, where the output lives.

The search checks every candidate's outputs against the reference candidate's
(optimize/evaluate.py) through ``Backend.keep_output`` and ``Backend.output_distance``. This is
the host's form, every backend's default: the output read back as comparable numbers (float32
for floats of up to 32 bits, float64 for the rest: exact either way) and measured with NumPy. A
device backend may keep the reference on its device and measure there (CUDA:
backends/cuda/distance.py), so only the figures come back.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

SHOWN = 4  # outputs of at most this many elements keep their values to show (a picked token)


class Distance(NamedTuple):
    """A candidate's output against the reference's, over the reference's finite elements."""
    biggest: float  # the largest |got - ref| (NaN or Inf where got is not finite there)
    l2: float  # ||got - ref||_2 (inf past float32's range)
    finite: bool  # whether got is finite wherever the reference is


class KeptOutput:
    """A reference output kept where it lives: its comparable values over its finite elements
    (``finite``: None when all are), their L2 norm, whether it is integer or bool
    (``discrete``), and its values when it is tiny (``shown``)."""

    def __init__(self, values: np.ndarray, discrete: bool, shown):
        fin = np.isfinite(values)
        self.finite = None if bool(fin.all()) else fin
        self.values = values if self.finite is None else values[fin]
        flat = self.values.ravel().astype(np.float64)
        self.norm = math.sqrt(float(np.dot(flat, flat))) + 1e-30
        self.discrete = discrete
        self.shown = shown
        self.device = None  # a device backend's own copy, where it measures (CUDA)


def distance(got: np.ndarray, kept: KeptOutput) -> Distance:
    """``got`` (comparable values of the reference's shape) against ``kept``: one array of
    |got - ref| worked in place (a model's outputs are tens of MB a candidate)."""
    if kept.finite is not None:
        got = got[kept.finite]
    diff = np.subtract(got, kept.values).ravel()
    np.abs(diff, out=diff)
    if not diff.size:
        return Distance(0.0, 0.0, True)
    big = float(diff.max())
    if not math.isfinite(big):
        return Distance(big, math.inf, bool(np.isfinite(got).all()))
    if big == 0.0:
        return Distance(0.0, 0.0, True)
    diff /= diff.dtype.type(big)  # (scaled by the largest difference: no float32 square overflows)
    return Distance(big, big * math.sqrt(float(np.dot(diff, diff))), True)


def comparable(a: np.ndarray) -> np.ndarray:
    """A host output as numbers to compare: float32 for floats of up to 32 bits (exact, and half
    the memory traffic of float64), else float64."""
    a = np.asarray(a)
    if a.dtype.kind not in "biu" and a.dtype.itemsize <= 4:
        return a.astype(np.float32, copy=False)
    return a.astype(np.float64, copy=False)


def keep_host(a: np.ndarray) -> KeptOutput:
    """A host output kept for comparisons (the default of ``Backend.keep_output``)."""
    a = np.asarray(a)
    with np.errstate(over="ignore", invalid="ignore"):
        return KeptOutput(comparable(a), a.dtype.kind in "biu",
                          a.ravel().tolist() if a.size <= SHOWN else None)


def host_distance(a: np.ndarray, kept: KeptOutput) -> Distance:
    with np.errstate(over="ignore", invalid="ignore"):
        return distance(comparable(a), kept)

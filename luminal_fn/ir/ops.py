"""The primitive ops of the HLIR (Luminal's set) and a small registry describing them.

Every op writes one contiguous buffer of its output shape; each input edge reads its producer
through a :class:`~luminal_fn.ir.view.View`. Everything else (sub, div, exp, matmul, softmax,
conv...) is decomposed into these by the front end.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpInfo:
    name: str
    arity: int  # -1: variadic
    kind: str  # "source", "unary", "binary", "reduce", "index", "custom", "sink"
    doc: str


PRIMITIVES: dict[str, OpInfo] = {}


def _p(name, arity, kind, doc):
    PRIMITIVES[name] = OpInfo(name, arity, kind, doc)


_p("Input", 0, "source", "a function argument (attrs: index, name)")
_p("Constant", 0, "source", "a literal scalar or a captured array (attrs: value)")
_p("Iota", 0, "source", "int32 values of an expression in z over 0..n-1 (attrs: expr)")
_p("Cast", 1, "unary", "convert to another dtype; to the same dtype it is a contiguous copy")
_p("Exp2", 1, "unary", "2**x")
_p("Log2", 1, "unary", "log2(x)")
_p("Sin", 1, "unary", "sin(x)")
_p("Sqrt", 1, "unary", "sqrt(x)")
_p("Recip", 1, "unary", "1/x")
_p("Add", 2, "binary", "a + b")
_p("Mul", 2, "binary", "a * b")
_p("Mod", 2, "binary", "fmod(a, b): the remainder with the sign of a, as C's fmod and %")
_p("LessThan", 2, "binary", "a < b as bool")
_p("SumReduce", 1, "reduce", "sum over one axis (attrs: axis)")
_p("MaxReduce", 1, "reduce", "max over one axis, NaN if any element is NaN (attrs: axis)")
_p("Gather", 2, "index", "out[i] = data.flat[clamp(indices[i])] (inputs: indices, data)")
_p("Scatter", 3, "index",
   "out = dest; out.flat[indices[i]] (op)= src[i], out-of-range dropped "
   "(inputs: dest, indices, src; attrs: mode in set/add/mul/max/min)")
_p("CustomOp", -1, "custom", "a backend kernel chosen by a rule (attrs: name, params)")
_p("Output", 1, "sink", "a function result (attrs: index)")

UNARY = tuple(n for n, i in PRIMITIVES.items() if i.kind == "unary")
BINARY = tuple(n for n, i in PRIMITIVES.items() if i.kind == "binary")
REDUCE = tuple(n for n, i in PRIMITIVES.items() if i.kind == "reduce")
ELEMENTWISE = UNARY + BINARY
SCATTER_MODES = ("set", "add", "mul", "max", "min")

# rms_norm_rows' CAST param (optimize/rules/specialize_norms.egg) -> the dtype name x * r is
# rounded to before the weight multiply (Hugging Face's half-precision norm); absent: none
RMS_ROWS_ROUNDING = {2: "bfloat16", 3: "float16"}

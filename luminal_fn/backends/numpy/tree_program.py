"""Fused trees as straight-line NumPy code: each distinct subtree computed once, broadcast
inputs read at their compact shape, temporaries overwritten in place.

A fused kernel's expression is a tree, so a value it uses several times appears several times
(the tanh-GELU's ``u + b`` five times); evaluating the tree node by node makes one pass over
memory per appearance. Here a tree is compiled, once, into a short Python function:

* common subtrees are computed once (structural equality of the tuples);
* an input read through a broadcast view (a stride-0 axis) is read with size 1 on that axis, so
  work that depends only on broadcast inputs (a layer norm's ``1 / sqrt(var + eps)``) runs on the
  small shape and NumPy broadcasts it where it meets a full-size operand;
* every temporary the function owns is written in place (``out=``) by the first later operation
  of the same shape once its own last use has passed (a register allocation over array shapes),
  so a chain of N elementwise operations allocates one buffer instead of N; a caller may also
  pass those buffers in (``buffer_shapes``), so a plan reuses them from call to call.

Only static shapes, unmasked views and trees whose every node, constant and input share one
float dtype (float32 or float64) take this path; ``compile_program`` returns None for anything
else and the kernel keeps the node-by-node evaluator. Results are the same operations in the same
order as the tree, so they are bit-for-bit those of evaluating it node by node.
"""
from __future__ import annotations

import numpy as np

from ...ir import dtypes as dt
from ...ir.llir import quotient

UFUNC_NAMES = {"Add": "add", "Mul": "multiply", "Exp2": "exp2", "Log2": "log2", "Sin": "sin",
           "Sqrt": "sqrt", "Recip": "reciprocal",
           # whole functions recognised by tree_peephole.rewrite
           "np.exp": "exp", "np.log": "log", "np.tanh": "tanh", "np.expm1": "expm1", "np.cos": "cos"}
_FLOATS = ("float32", "float64")


def compact_view(view, producer_shape):
    """``(shape, strides, offset)`` in elements reading ``view`` with every broadcast axis (stride
    0) kept at size 1, or None when the view is symbolic, masked or empty."""
    if not view.is_static() or view.mask is not None or 0 in view.shape:
        return None
    shape = tuple(1 if s == 0 else d for d, s in zip(view.shape, view.strides))
    strides = tuple(0 if d == 1 else s for d, s in zip(shape, view.strides))
    return shape, strides, view.offset


def compact_reader(src: int, view, producer_shape, dtype):
    """A function ``vals -> ndarray`` for one input edge at its compact shape, or None."""
    cv = compact_view(view, producer_shape)
    if cv is None or not all(isinstance(d, int) for d in producer_shape):
        return None
    shape, strides, offset = cv
    contiguous, step = True, 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != step:
            contiguous = False
        step *= d
    numel = int(np.prod(producer_shape, dtype=np.int64)) if producer_shape else 1
    if contiguous and offset == 0 and step == numel:
        if shape == tuple(producer_shape):
            return lambda vals: vals[src]
        return lambda vals: vals[src].reshape(shape)  # a free view: same memory, new shape
    item = np.dtype(dtype).itemsize
    byte_strides, byte_offset = tuple(s * item for s in strides), offset * item

    def read(vals):
        flat = vals[src].reshape(-1)  # a view of the contiguous buffer (a copy otherwise)
        return np.ndarray(shape, flat.dtype, flat, byte_offset, byte_strides)

    return read


class _Builder:
    def __init__(self, arg_shapes, dtype):
        self.arg_shapes = arg_shapes
        self.dtype = dtype
        self.slots: dict = {}  # subtree -> slot name
        self.shapes: dict = {}  # slot name -> shape
        self.ops: list = []  # (slot, ufunc name, operand slots)
        self.consts: dict = {}  # name -> value

    def slot(self, tree):
        hit = self.slots.get(tree)
        if hit is not None:
            return hit
        tag = tree[0]
        if tag == "in":
            name, shape = f"a{tree[1]}", self.arg_shapes[tree[1]]
        elif tag == "const":
            if tree[2] != self.dtype:
                raise _Unsupported
            name, shape = f"c{len(self.consts)}", ()
            self.consts[name] = np.dtype(self.dtype).type(tree[1])
        elif tag in UFUNC_NAMES and tree[1] == self.dtype:
            q = quotient(tree)  # a * recip(b): one rounding, as NumPy's a / b
            kids = [self.slot(t) for t in (q or tree[2:])]
            if len(kids) != (2 if tag in ("Add", "Mul") else 1):
                raise _Unsupported
            name = f"t{len(self.ops)}"
            shape = np.broadcast_shapes(*(self.shapes[k] for k in kids))
            self.ops.append((name, "divide" if q else UFUNC_NAMES[tag], kids))
        else:
            raise _Unsupported
        self.slots[tree] = name
        self.shapes[name] = shape
        return name


class _Unsupported(Exception):
    pass


def compile_program(tree, arg_shapes, arg_dtypes, dtype: str, keep=()):
    """``fn(*args) -> ndarray`` evaluating ``tree`` (already peephole-rewritten) over arguments of
    the given static compact shapes, or None when the tree is outside this path (see module
    doc). The result is the root's value at its own (broadcastable) shape; when the root is an
    operation it is a fresh array the caller may keep. ``keep``: operation subtrees of ``tree``
    whose values later kernels read (plan_share); then fn returns ``(root, *kept)`` and never
    overwrites a kept value."""
    if dtype not in _FLOATS or any(dt.to_numpy(d) != np.dtype(dtype) for d in arg_dtypes):
        return None
    b = _Builder([tuple(s) for s in arg_shapes], dtype)
    try:
        root = b.slot(tree)
        kept = [b.slot(t) for t in keep]
    except _Unsupported:
        return None
    if any(not k.startswith("t") for k in kept):
        raise ValueError("compile_program: only operation subtrees can be kept")
    return _emit(b, root, len(arg_shapes), kept)


def _emit(b: _Builder, root: str, n_args: int, kept=()):
    last_use = {}
    for k, (_, _, kids) in enumerate(b.ops):
        for s in kids:
            last_use[s] = k
    for s in (root, *kept):
        last_use[s] = len(b.ops)  # results outlive the program
    buffer_of: dict = {}  # temp slot -> buffer name holding it
    free: dict = {}  # shape -> buffer names whose value is dead
    lines, buffer_shapes = [], []
    for k, (name, ufunc, kids) in enumerate(b.ops):
        shape = b.shapes[name]
        # operands whose last use is this op may be overwritten by it (elementwise: each output
        # element reads only the same element of a same-shaped operand)
        for s in dict.fromkeys(kids):
            if s in buffer_of and last_use[s] == k:
                free.setdefault(b.shapes[s], []).append(buffer_of[s])
        args = ", ".join(kids)
        if not shape:  # a 0-d result is a NumPy scalar: no buffer
            lines.append(f"    {name} = {ufunc}({args})")
            continue
        pool = free.get(shape)
        if pool:
            buf = pool.pop()
        else:
            buf = f"b{len(buffer_shapes)}"
            buffer_shapes.append(shape)
        # a buffer parameter left None makes the first ufunc writing it allocate it
        lines.append(f"    {buf} = {name} = {ufunc}({args}, out={buf})")
        buffer_of[name] = buf
    params = ", ".join([f"a{k}" for k in range(n_args)] + [f"b{j}=None" for j in range(len(buffer_shapes))])
    ret = ", ".join((root, *kept)) if kept else root
    src = f"def program({params}):\n" + "\n".join(lines + [f"    return {ret}"]) + "\n"
    namespace = {u: getattr(np, u) for u in set(UFUNC_NAMES.values()) | {"divide"}}
    namespace.update(b.consts)
    exec(compile(src, "<fused tree program>", "exec"), namespace)
    fn = namespace["program"]
    fn.source = src
    fn.root_is_temp = root.startswith("t")
    fn.root_shape = b.shapes[root]
    # for a caller that owns the memory (the plan's arena): the shape of each buffer parameter
    # and which of them ends up holding the root and each kept value
    fn.buffer_shapes = tuple(buffer_shapes)
    fn.root_buffer = _index(buffer_of.get(root))
    fn.kept_buffers = tuple(_index(buffer_of.get(k)) for k in kept)
    return fn


def _index(buf):
    return None if buf is None else int(buf[1:])


__all__ = ["compile_program", "compact_reader", "compact_view"]

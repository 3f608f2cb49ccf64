"""Room on the Python stack for walks whose depth grows with the graph.

Extraction walks from the outputs through every producer it materialises, recursing a few frames
a node (fused trees, whose depth the extractor bounds, are what the backends walk). A long chain
of ops (a deep model unrolled, a hundred elementwise steps) needs more frames than Python's
default limit of 1000, and every search candidate then failed with RecursionError.
``deep_recursion(n)`` raises the interpreter's limit for the duration of such a walk (never lowers
it) and puts it back when the last walk in flight ends. CPython 3.11+ runs Python-to-Python calls without growing the C stack, so a limit in the
tens of thousands is safe here (a 29,000-node chain was extracted and compiled with it).
"""
from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

FRAMES_PER_NODE = 8  # extraction uses a few frames a node; generous
BASE_FRAMES = 2000  # what the caller's own stack and the libraries below may use

_lock = threading.Lock()
_active = 0
_saved = None


@contextmanager
def deep_recursion(n_nodes: int):
    """Allow recursion as deep as a walk over ``n_nodes`` nodes may need, for this block.
    Nested and concurrent blocks share one raised limit; the original returns after the last."""
    global _active, _saved
    want = BASE_FRAMES + FRAMES_PER_NODE * max(0, int(n_nodes))
    with _lock:
        if _active == 0:
            _saved = sys.getrecursionlimit()
        _active += 1
        if want > sys.getrecursionlimit():
            sys.setrecursionlimit(want)
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                sys.setrecursionlimit(_saved)
                _saved = None


__all__ = ["deep_recursion"]

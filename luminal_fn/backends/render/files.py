"""Hand-written kernel sources shipped as files (kernels/*.cu, kernels/*.metal)."""
from __future__ import annotations

import os


def kernel_file(name: str) -> str:
    """A kernels/ source: from the installed ``luminal_fn.kernels`` package, or from the
    repository's top-level kernels/ folder when running from a checkout."""
    try:
        from ...kernels import source  # installed wheel: kernels/ is luminal_fn.kernels

        return source(name)
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "..", "kernels", name)) as f:
            return f.read()


__all__ = ["kernel_file"]

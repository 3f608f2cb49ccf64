"""Hand-written kernel sources (.cu for CUDA, .metal for MLX/Metal) that rules can select."""
from __future__ import annotations

from importlib import resources


def source(name: str) -> str:
    """The text of a kernel source file shipped with luminal_fn (for example ``"gemv.cu"``)."""
    return resources.files(__name__).joinpath(name).read_text()

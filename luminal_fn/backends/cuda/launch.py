"""The launch shape of a planned kernel at a bucket's largest dims (pure Python), and the plain
launch of a kernel of a bucket (pdl.PdlLaunch is the programmatic one; both are called with the
stream's pointer)."""
from __future__ import annotations

from ...ir.expr import as_expr

GRID_CAP_BLOCKS = 32  # default grid cap per SM for grid-stride kernels


def evaluate(e, dims) -> int:
    return e if isinstance(e, int) else as_expr(e).evaluate(dims)


def launch_shape(src, dims_max: dict, sm_count: int) -> tuple:
    """(grid, block) of a kernel at the bucket's largest dims (grid-stride loops cover less)."""
    block = (int(src.block), 1, 1)
    g3 = src.meta.get("grid3")
    if g3 is not None:
        grid = tuple(max(1, int(evaluate(g, dims_max))) for g in g3) + (1,) * (3 - len(g3))
        return grid, block
    work = max(int(evaluate(src.work, dims_max)), 1)
    blocks = -(-work // max(int(src.per_block), 1))
    cap = (2**31 - 1) if src.grid_cap is None else (src.grid_cap or sm_count * GRID_CAP_BLOCKS)
    return (max(1, min(blocks, cap, 2**31 - 1)), 1, 1), block


class PlainLaunch:
    """One kernel of a bucket launched through CuPy on the current stream (``stream_ptr``, the
    same stream, is what a PdlLaunch needs and is unused here)."""

    def __init__(self, fn, name: str, grid, block, args, shared_bytes: int):
        self.name, self.grid, self.block = name, tuple(grid), tuple(block)
        self._fn, self._args, self._shm = fn, args, shared_bytes

    def __call__(self, stream_ptr: int):
        self._fn(self.grid, self.block, self._args, shared_mem=self._shm)


__all__ = ["GRID_CAP_BLOCKS", "PlainLaunch", "evaluate", "launch_shape"]

"""The launch shape of a planned kernel at a bucket's largest dims (pure Python)."""
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


__all__ = ["GRID_CAP_BLOCKS", "evaluate", "launch_shape"]

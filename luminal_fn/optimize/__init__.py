"""The optimizer: HLIR -> e-graph of implementations -> search -> LLIR per dim bucket."""
from __future__ import annotations

from .program import Program, lower_graph

__all__ = ["Program", "lower_graph"]

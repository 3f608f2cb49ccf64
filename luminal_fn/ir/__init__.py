"""The HLIR: symbolic integer expressions, dtypes, views, primitive ops, graphs and passes."""
from . import dtypes, expr, ops, passes
from .graph import Graph, Node
from .view import View

__all__ = ["dtypes", "expr", "ops", "passes", "Graph", "Node", "View"]

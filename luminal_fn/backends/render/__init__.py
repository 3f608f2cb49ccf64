"""The shared C-style kernel renderer (CUDA today, Metal through the same code).

lang.py holds the per-language tables, index.py the view index arithmetic, tree.py the
expression-tree renderer, kernels.py elementwise and scatter kernels, reduce.py reductions and
nodes.py the mapping from graph nodes to kernels. Nothing here needs a GPU or CuPy.
"""
from .kernels import KernelInput, KernelSource, render_elementwise, render_scatter
from .lang import CUDA, LANGUAGES, METAL, Language, get_language
from .nodes import Rendered, render_copy, render_node, renderable
from .reduce import render_reduce

__all__ = ["CUDA", "METAL", "LANGUAGES", "Language", "get_language", "KernelInput", "KernelSource",
           "Rendered", "render_elementwise", "render_scatter", "render_reduce", "render_node",
           "render_copy", "renderable"]

"""A lowered program: what the optimizer hands the jit for one traced graph and backend."""
from __future__ import annotations


class Runner:
    """Runs the executable chosen for the dims of each call."""

    def __init__(self, executable):
        self.executable = executable

    def run(self, bufs, dims):
        return self.executable.run(bufs, dims)

    def as_text(self) -> str:
        return self.executable.describe()

    def cost(self) -> dict:
        return {}


class Program:
    def __init__(self, graph, backend, search=None, buckets=None, symbols=(), fn_name="fn"):
        self.graph = graph
        self.backend = backend
        self.search = search
        self.buckets = buckets
        self.symbols = list(symbols)
        self.fn_name = fn_name

    def as_text(self) -> str:
        return self.graph.as_text()

    def stats(self) -> dict:
        return {"hlir_nodes": len(self.graph)}

    def compile(self) -> Runner:
        return Runner(self.backend.compile(self.graph))


def lower_graph(graph, backend, search=None, buckets=None, symbols=(), fn_name="fn") -> Program:
    return Program(graph, backend, search, buckets, symbols, fn_name)

"""tree_merge: a fused kernel read whole by one later kernel only is written into that kernel's
tree (NumPy backend), and nothing else is; results are bit-for-bit those of the unmerged plan."""
import numpy as np

from luminal_fn.backends import get_backend
from luminal_fn.backends.numpy.tree_merge import inline_single_readers
from luminal_fn.ir import dtypes as dt
from luminal_fn.ir.graph import Graph
from luminal_fn.ir.view import View

F32 = dt.float32
C = View.contiguous


def _graph(reader_view=None, extra_reader=False, producer_is_output=False, chain=False):
    """a -> p = a * 3 (-> q = sqrt(p) when chain) -> c = produced + a -> output."""
    g = Graph("t")
    a = g.add("Input", (), (2, 3), F32, index=0, name="a")
    p = g.add("CustomOp", ((a, C((2, 3))),), (2, 3), F32, name="fused",
              expr=("Mul", "float32", ("in", 0), ("const", 3.0, "float32")))
    if chain:
        p = g.add("CustomOp", ((p, C((2, 3))),), (2, 3), F32, name="fused",
                  expr=("Sqrt", "float32", ("in", 0)))
    c = g.add("CustomOp", ((p, reader_view or C((2, 3))), (a, C((2, 3)))), (2, 3), F32, name="fused",
              expr=("Add", "float32", ("in", 0), ("in", 1)))
    g.add("Output", ((c, C((2, 3))),), (2, 3), F32, index=0)
    if extra_reader:
        d = g.add("CustomOp", ((p, C((2, 3))),), (2, 3), F32, name="fused",
                  expr=("Mul", "float32", ("in", 0), ("in", 0)))
        g.add("Output", ((d, C((2, 3))),), (2, 3), F32, index=1)
    if producer_is_output:
        g.add("Output", ((p, C((2, 3))),), (2, 3), F32, index=len(g.outputs))
    return g


def _fused(g):
    return [n for n in g.live_nodes() if n.op == "CustomOp"]


def _run(g, x):
    return [np.asarray(o) for o in get_backend("numpy").compile(g).run([x], {})]


X = np.float32([[0.0, -0.0, 1.5], [-2.0, np.inf, 4.0]])


def test_a_producer_read_whole_by_one_kernel_is_written_into_it():
    g = _graph()
    before = [n.attrs.get("expr") for n in g.live_nodes()]
    m = inline_single_readers(g)
    (k,) = _fused(m)
    a = g.inputs[0]
    assert k.inputs == ((a, C((2, 3))),)  # the input both read is one input, read once
    assert k.attrs["expr"] == ("Add", "float32", ("Mul", "float32", ("in", 0), ("const", 3.0, "float32")), ("in", 0))
    assert [n.attrs.get("expr") for n in g.live_nodes()] == before  # the given graph is untouched
    np.testing.assert_array_equal(_run(g, X)[0], X * np.float32(3) + X)


def test_a_chain_merges_into_its_last_reader():
    g = _graph(chain=True)
    (k,) = _fused(inline_single_readers(g))
    assert k.attrs["expr"][2] == ("Sqrt", "float32", ("Mul", "float32", ("in", 0), ("const", 3.0, "float32")))
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(_run(g, X)[0], np.sqrt(X * np.float32(3)) + X)


def test_shared_outputs_and_other_views_stay_stored():
    for g in (_graph(extra_reader=True), _graph(producer_is_output=True),
              _graph(reader_view=C((3, 2)).permute((1, 0)))):
        assert inline_single_readers(g) is g, g.as_text()
    g = _graph(extra_reader=True)
    out = _run(g, X)
    np.testing.assert_array_equal(out[0], X * np.float32(3) + X)
    np.testing.assert_array_equal(out[1], (X * np.float32(3)) ** 2)

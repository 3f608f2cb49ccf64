"""Reading integers back out of the e-graph: an Expr e-class as a symbolic integer (the simplest
of its equal forms), EList classes as tuples, Mask classes as per-axis ranges, and a view e-node
as a :class:`~luminal_fn.ir.view.View`."""
from __future__ import annotations

from ..ir.expr import add, compare, floordiv, maximum, minimum, mod, mul, to_int_or_expr, var
from ..ir.view import View


class DecodeCycle(Exception):
    """Every form of an e-class refers back to itself (tried the next form instead)."""


class IntegerDecoder:
    def __init__(self, egraph):
        self.eg = egraph
        self._expr_memo: dict = {}
        self._list_memo: dict = {}

    def expr(self, cls):
        """The symbolic integer an Expr e-class holds (the simplest of its equal forms)."""
        hit = self._expr_memo.get(cls)
        if hit is None:
            hit = self._expr_memo[cls] = self._expr(cls, frozenset())
        return hit

    def _expr(self, cls, visiting):
        nodes = sorted(self.eg.classes[cls], key=lambda n: (n.op not in ("MNum", "MVar"), len(n.children)))
        for n in nodes:
            if any(c in visiting for c in n.children):
                continue
            try:
                return self._expr_node(n, visiting | {cls})
            except DecodeCycle:
                continue
        raise DecodeCycle()

    def _expr_node(self, n, visiting):
        op = n.op
        if op == "MNum":
            return self.eg.literal(n.children[0])
        if op == "MVar":
            return var(self.eg.literal(n.children[0]))
        if op == "MCmp":
            a, b = (self._sub(c, visiting) for c in n.children[1:])
            return to_int_or_expr(compare(self.eg.literal(n.children[0]), a, b))
        a, b = (self._sub(c, visiting) for c in n.children)
        fn = {"MAdd": add, "MMul": mul, "MDiv": floordiv, "MMod": mod, "MMin": minimum,
              "MMax": maximum}[op]
        return to_int_or_expr(fn(a, b))

    def _sub(self, cls, visiting):
        hit = self._expr_memo.get(cls)
        return hit if hit is not None else self._expr(cls, visiting)

    def elist(self, cls) -> tuple:
        hit = self._list_memo.get(cls)
        if hit is not None:
            return hit
        self._list_memo[cls] = out = tuple(self.expr(c) for c in self.cons_items(cls))
        return out

    def cons_items(self, cls, cons: str = "ECons", nil: str = "ENil") -> list:
        """The head classes of a cons list (EList by default; IList with "ICons", "INil")."""
        out, cur = [], cls
        while True:
            node = next(n for n in self.eg.classes[cur] if n.op in (cons, nil))
            if node.op == nil:
                return out
            out.append(node.children[0])
            cur = node.children[1]

    def mask(self, cls):
        node = self.eg.classes[cls][0]
        if node.op == "MaskNone":
            return None
        return tuple(zip(self.elist(node.children[0]), self.elist(node.children[1])))

    def view_of(self, vnode) -> View:
        shape, strides, offset, mask = vnode.children[1:]
        return View(self.elist(shape), self.elist(strides), self.expr(offset), self.mask(mask))



__all__ = ["IntegerDecoder", "DecodeCycle"]

"""The tree of one fused kernel, built while a genome is extracted (extract.py): each FT e-class
becomes a node of the kernel's expression, or a leaf reading a buffer that another kernel
writes. A producer read through a view may be computed in place (``FView``), a repeated scalar
constant or iota inlined as a literal, and a tree that grows past MAX_TREE nodes (or, walked as
a tree, past MAX_EXPANDED) reads buffers instead; a choice impossible here is repaired by taking
the class's next option (``_Cycle``)."""
from __future__ import annotations

from ..ir.expr import as_expr, substitute, var
from ..ir.llir import literal_tree
from ..ir.view import View
from .decode import DecodeCycle
from .view_inline import maps_zero_to_zero

VIEW_INLINE = "FView"  # made by the Extractor, not the rules: see extract.py's docstring
MAX_TREE = 96  # fused trees beyond this many nodes stop inlining (code size, recomputation)
# a subtree met again in one kernel is the same object, but every backend walks the tree as a
# tree: past this many nodes so counted, a subtree read again reads its buffer
MAX_EXPANDED = 1024
# nodes one kernel's tree may visit, counting the options tried and rolled back, before it
# stops computing producers through views: a read that cannot be composed through the views
# above it forces the level below open, so a chain of L shifted adds (a static scan's steps)
# explored 2^L trees (139 s of search for a cumsum over 128256 elements)
MAX_VISITS = MAX_EXPANDED

_Cycle = DecodeCycle  # one exception for "this option refers back to itself": repaired alike


class ExtractionError(RuntimeError):
    """No option of some e-class can be extracted (a rule built an unusable term)."""


class FusedTreeBuilder:
    """The fused-tree half of one genome's extraction (extract._Extraction): needs ``ex``,
    ``memo``, ``recomputing``, ``slack``, ``transform``, ``visits``, ``ordered`` and
    ``materialize``."""

    def kernel_tree(self, ft, root, edges):
        """The whole tree of one fused kernel (leaves may materialise other kernels, each with
        its own memo)."""
        saved, self.memo = self.memo, {}
        saved_depth, self.recomputing = self.recomputing, 0
        saved_transform, self.transform = self.transform, ()
        saved_slack, self.slack = self.slack, 1
        saved_visits, self.visits = self.visits, 0
        try:
            return self.tree(ft, root, edges, [0])
        finally:
            self.memo, self.recomputing, self.transform = saved, saved_depth, saved_transform
            self.slack, self.visits = saved_slack, saved_visits

    def tree(self, ft, root, edges: list, size: list):
        """The LLIR tree for FT class ``ft`` inside the kernel computing ``root``; appends the
        kernel's input edges to ``edges``. ``size`` counts tree nodes (a one-element list).
        A class met twice in one kernel at the same coordinates gives the same subtree
        (``self.memo``, per kernel)."""
        key = (ft, self.transform)
        hit = self.memo.get(key)
        if hit is not None:
            if hit[1] > 1 and size[0] + hit[1] > MAX_EXPANDED:
                # read again where the kernel's tree, counted as the tree every backend walks,
                # would pass MAX_EXPANDED: its buffer instead, else a value reused at every
                # level (x = x * x) doubles the kernel a level
                leaf = self._leaf_instead(ft, root, edges, size)
                if leaf is not None:
                    self.memo[key] = (leaf, 1)
                    return leaf
            size[0] += hit[1]
            return hit[0]
        before = size[0]
        out = self._tree(ft, root, edges, size)
        self.memo[key] = (out, size[0] - before)
        return out

    def _tree(self, ft, root, edges, size):
        opts = self.ordered(ft)
        producer = self.ex.shared(ft)
        shared = producer is not None
        # A shared value recomputed inside the recomputation of another may read no more than
        # reading its own buffer would: a residual stream x + h1 + h2 + ... inlined level by
        # level would make layer L's kernels re-read all L earlier contributions, while index
        # arithmetic on one input (wrap negative indices, then clamp) reads just that input.
        # Once per kernel it may read one more, when that spares storing a value nothing has
        # stored yet (softmax's normalisation recomputing the scaled, masked scores).
        # Large trees stop inlining (leaves first).
        nested = shared and self.recomputing
        allowed = (0 if producer in self.buf else 1) if nested else 0  # the leaf's own read
        if size[0] > MAX_TREE:
            opts = sorted(opts, key=lambda n: n.op != "FLeaf")
        mark = self._mark(edges, size)
        for n in opts:
            inlined = shared and n.op != "FLeaf"
            self.recomputing += inlined
            try:
                out = self._tree_node(n, ft, root, edges, size)
                extra = len(edges) - mark[0] - allowed
                if nested and inlined and extra > 0:
                    if not (allowed and extra <= self.slack):
                        self._rollback(mark, edges, size)  # it reads more: read the value instead
                        continue
                    self.slack -= extra
                return out
            except _Cycle:
                self._rollback(mark, edges, size)
            finally:
                self.recomputing -= inlined
        raise _Cycle()

    def _leaf_instead(self, ft, root, edges, size):
        """The read of FT class ``ft``'s own buffer (its FLeaf option), or None without one."""
        for n in self.ordered(ft):
            if n.op != "FLeaf":
                continue
            mark = self._mark(edges, size)
            try:
                return self._tree_node(n, ft, root, edges, size)
            except _Cycle:
                self._rollback(mark, edges, size)
        return None

    def _mark(self, edges, size):
        return len(edges), size[0], len(self.memo)

    def _rollback(self, mark, edges, size):
        """Forget a failed option: its inputs are not the kernel's, nor are its subtrees (which
        index those inputs) reusable."""
        n_edges, size[0], n_memo = mark
        del edges[n_edges:]
        for key in list(self.memo)[n_memo:]:
            del self.memo[key]

    def _scalar_constant(self, producer, vnode):
        """A fused-tree literal for a read of a scalar Constant that no mask cuts (no kernel
        input)."""
        opts = self.ex.options.get(producer)
        if not opts or opts[0].op != "Const":
            return None
        if (vnode is not None and self.ex.mask(vnode.children[4]) is not None
                and self.ex.view_of(vnode).drop_full_mask().mask is not None):
            return None
        node = self.ex.hlir.nodes[self.eg.literal(opts[0].children[0])]
        value = _literal_of(node)
        if value is None:
            return None
        divisor = node.attrs.get("divisor")
        if divisor is not None:  # a folded 1 / c: kept as recip(c), so a product divides by c
            return ("Recip", node.dtype.name, literal_tree(divisor, node.dtype.name))
        return literal_tree(value, node.dtype.name)

    def _iota_value(self, producer, vnode):
        """A fused-tree ("iota", expr) for a read of an Iota, computed in place of its buffer (no
        kernel, no load): its expression of the flat index z, with z the buffer index that the
        read's view (composed through any view-inlined producer) gives at the tree's own flat
        index (a broadcast row of positions: z % n). Not under a mask (reads outside give 0)."""
        opts = self.ex.options.get(producer)
        if not opts or opts[0].op != "Iota":
            return None
        view = self.ex.view_of(vnode) if vnode is not None else View.contiguous(self.ex.tensor(producer)[0])
        for how in reversed(self.transform):
            view = how.apply(view)
            if view is None:
                return None
        view = view.drop_full_mask()
        if view.mask is not None:
            return None
        expr = as_expr(self.ex.expr(opts[0].children[0]))
        if "z" in expr.free_symbols():
            expr = substitute(expr, {"z": view.flat_index(var("z"))})
        return ("iota", expr)

    def _tree_node(self, n, ft, root, edges, size):
        self.visits += 1
        if self.transform and self.visits > MAX_VISITS:
            raise _Cycle()  # give up computing through views: see MAX_VISITS
        lit = self.eg.literal
        ch = n.children
        if n.op == "FLeaf":
            target = ch[0]
            v = self.ex.views.get(target)
            producer = v.children[0] if v is not None else target
            if producer == root or producer in self.active:
                raise _Cycle()
            const = self._scalar_constant(producer, v) or self._iota_value(producer, v)
            if const is not None:
                size[0] += 1
                return const
            edge = self.edge(target)
            for how in reversed(self.transform):
                view = how.apply(edge[1])
                if view is None:
                    raise _Cycle()  # strides cannot say it: repaired to reading the buffer
                edge = (edge[0], view)
            # a mask that keeps everything is no mask: the same read as the unmasked one
            # (lnp.where's branches), one input edge
            edge = (edge[0], edge[1].drop_full_mask())
            if edge not in edges:
                edges.append(edge)
            size[0] += 1
            return ("in", edges.index(edge))
        if n.op == VIEW_INLINE:
            return self._through_view(ft, root, edges, size)
        size[0] += 1
        d = self.ex.ft_dtype(ft).name
        if n.op == "FUn":
            return (lit(ch[0]), d, self.tree(ch[1], root, edges, size))
        if n.op == "FBin":
            op = lit(ch[0])
            a = self.tree(ch[1], root, edges, size)
            b = self.tree(ch[2], root, edges, size)
            return (op, "bool" if op == "LessThan" else d, a, b)
        if n.op == "FCast":
            return ("Cast", lit(ch[1]), self.tree(ch[0], root, edges, size))
        if n.op == "FSel":
            c, x, y = (self.tree(c, root, edges, size) for c in ch)
            return ("Select", d, c, x, y)
        raise ExtractionError(f"unknown fused tree node {n.op}")

    def _through_view(self, ft, root, edges, size):
        """The producer that FT class ``ft`` reads through a view, computed here: one of its
        own expansions (the genome's order, never its plain read, which is this option's
        alternative) with every input read composed through the view."""
        inner, how = self.ex.through[ft]
        saved = self.transform
        self.transform = saved + (how,)
        try:
            mark = self._mark(edges, size)
            for n in self.ordered(inner):
                if n.op == "FLeaf":
                    continue
                try:
                    out = self._tree_node(n, inner, root, edges, size)
                    if how.pads and not maps_zero_to_zero(out):
                        raise _Cycle()  # the padded read's zeros would not come out as zeros
                    return out
                except _Cycle:
                    self._rollback(mark, edges, size)
            raise _Cycle()
        finally:
            self.transform = saved


def _literal_of(node):
    """A scalar Constant's Python value, else None."""
    if node is None or node.op != "Constant":
        return None
    v = node.attrs.get("value")
    if isinstance(v, (bool, int, float)):
        return v
    if getattr(v, "ndim", None) == 0:
        return v.item()
    return None

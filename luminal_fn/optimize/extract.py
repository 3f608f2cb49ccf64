"""Extraction: one choice per e-class (a genome) -> the LLIR graph of kernels a backend runs.

Genes are the IR and FT e-classes with more than one usable e-node. Options are ordered by the
rules' static cost, so the all-zeros genome is the cheapest-looking implementation.

A genome's choice can be impossible in context: an FT class chosen as "read the buffer" inside
the fused kernel that computes that very buffer is a cycle, and a fused tree can grow too large
to be worth inlining. Extraction then repairs instead of rejecting: it takes the next option of
that class. Every genome therefore extracts to a valid graph (different genomes may give the
same graph; the search times each distinct graph once).

The rules inline an elementwise producer only into consumers that read it without a view. For a
read through a view that is a reshape, slice and broadcast of the producer (view_inline.py), the FT
class of that read gets one more option made here, ``FView``: compute the producer in the
consumer's kernel with every input view composed through the read's view. It comes first, so
the cheapest genome takes it (one kernel and one round trip fewer); a composition strides cannot
express is repaired to the plain read.
"""
from __future__ import annotations

import operator

from ..ir import dtypes as dt
from ..ir.expr import as_expr
from ..ir.graph import Graph
from ..ir.passes import dce
from ..ir.recursion import deep_recursion
from ..ir.view import View
from .decode import IntegerDecoder
from .egraph import ENode
from .exact_joins import join_tree
from .fused_tree import VIEW_INLINE, ExtractionError, FusedTreeBuilder, _Cycle
from .repeats import neighbourhood_signatures
from .search import ChoiceSpace, Gene
from .view_inline import through

IR_KERNELS = {"Inp", "Const", "Iota", "Cast", "Un", "Bin", "Sum", "Max", "Gath", "Scat", "Custom",
              "Fused", "FusedReduce", "MatMul", "Kernel"}
FT_NODES = {"FLeaf", "FUn", "FBin", "FCast", "FSel"}
_OP_ORDER = {op: i for i, op in enumerate(
    ["MatMul", "Kernel", "FusedReduce", "Fused", "Custom", "Inp", "Const", "Iota", "Cast", "Un",
     "Bin", "Sum", "Max", "Gath", "Scat", "FSel", "FBin", "FUn", "FCast", "FLeaf"])}


class Extractor(IntegerDecoder):
    """Everything about an e-graph that does not depend on the genome, computed once."""

    def __init__(self, egraph, hlir: Graph, kernel_kinds=frozenset(), name: str | None = None,
                 tie_repeats: bool = True):
        IntegerDecoder.__init__(self, egraph)
        self.hlir = hlir
        self.name = name or hlir.name
        self.kernel_kinds = frozenset(kernel_kinds)
        # HLIR facts per e-class: shape and dtype come from the HLIR node(s) that landed there
        self.node_in: dict = {}
        for hid, cls in egraph.node_of.items():
            self.node_in.setdefault(cls, self.hlir.nodes[hid])
        self.options: dict = {}
        for cls, nodes in egraph.classes.items():
            sort = egraph.sorts.get(cls)
            if sort == "IR":
                opts = [n for n in nodes if n.op in IR_KERNELS and self._kernel_allowed(n)]
            elif sort == "FT":
                opts = [n for n in nodes if n.op in FT_NODES]
            else:
                continue
            live = [n for n in opts if not n.subsumed] or opts
            live.sort(key=lambda n: (n.cost, _OP_ORDER.get(n.op, 99), n.children))
            self.options[cls] = live
        self.views = {}  # IR class -> its V e-node, for classes that are views of a tensor
        for cls, nodes in egraph.classes.items():
            vs = [n for n in nodes if n.op == "V"]
            if vs and egraph.sorts.get(cls) == "IR":
                self.views[cls] = next((n for n in vs if not n.subsumed), vs[0])
        self.through: dict = {}  # FT class read through a view -> (producer's FT class, ViewThrough)
        self._add_view_inlines()
        self._ft_dtype: dict = {}
        self._plain_views: dict = {}  # IR class -> the View of its whole tensor
        # each extraction extract_keyed made: (the genes it read, as a function of a genome;
        # their values; its LLIR; its structural hash), for every bucket's search
        self._walks: list = []
        self._kernel_genomes = None  # kernel_genomes(), once
        self._readers: dict = {}
        for n in hlir.live_nodes():
            for i, _ in n.inputs:
                self._readers[i] = self._readers.get(i, 0) + 1
        self._shared_ft: dict = {}
        self._inline_half_products()
        # options past choosable[cls] are the extraction's fallbacks only: no genome picks them
        self.choosable: dict = {}
        self._composites_only()
        self._divide_where_used()
        # Repeated structure (a transformer's layers) shares genes: e-classes whose HLIR
        # neighbourhood and options look alike take one choice, so 16 layers do not multiply
        # the search space by 16. Extraction is unaffected: it repairs whatever it is given.
        sigs = neighbourhood_signatures(hlir) if tie_repeats else None
        self.genes: list = []
        self.gene_of: dict = {}  # e-class -> the name of the gene choosing for it
        groups: dict = {}
        live = self._reachable()
        for cls in sorted((c for c in live if self.n_choices(c) > 1), key=_class_key):
            key = self._signature(cls, sigs) if sigs is not None else cls
            name = groups.get(key)
            if name is None:
                name = groups[key] = cls
                self.genes.append(Gene(cls, self.n_choices(cls)))
            self.gene_of[cls] = name
        self._gene_index = {g.name: i for i, g in enumerate(self.genes)}  # (extract_reading)

    def _add_view_inlines(self):
        """An ``FView`` option, first, on each FT class that reads an elementwise producer through
        a view the producer can be computed through."""
        leaf_ft = {}  # IR class -> the FT class of (FLeaf it)
        for cls, nodes in self.eg.classes.items():
            for n in nodes:
                if n.op == "FLeaf":
                    leaf_ft.setdefault(n.children[0], cls)
        for target, ft in leaf_ft.items():
            vnode = self.views.get(target)
            if vnode is None or ft not in self.options:
                continue
            producer = vnode.children[0]
            inner = leaf_ft.get(producer)
            if inner is None or producer in self.views or producer not in self.node_in:
                continue
            if not any(n.op != "FLeaf" for n in self.options.get(inner, ())):
                continue  # not elementwise: nothing to compute in the consumer
            how = through(self.view_of(vnode), self.tensor(producer)[0])
            if how is None:
                continue
            self.through[ft] = (inner, how)
            self.options[ft] = [ENode(VIEW_INLINE, (inner,), 0.0, False)] + self.options[ft]

    def _inline_half_products(self):
        """A half-precision product summed by nothing else (a traced matmul's Mul before its
        SumReduce) is computed inside the sum, never stored: a stored product is rounded to 8 or
        11 bits before it is added, and over a K-long sum that error grows with sqrt(K) (bf16,
        K = 2048: 3% of a small output), where the program's matmul rounds only its result."""
        for nodes in self.eg.classes.values():
            for n in nodes:
                if n.op != "FusedReduce" or self.eg.literal(n.children[0]) != "sum":
                    continue
                body = n.children[1]
                opts = self.options.get(body, ())
                leaf = next((o for o in opts if o.op == "FLeaf"), None)
                if leaf is None or len(opts) < 2 or leaf.children[0] in self.views or self.shared(body):
                    continue
                node = self.node_in.get(leaf.children[0])
                if node is not None and node.op == "Mul" and node.dtype.is_float and node.dtype.itemsize < 4:
                    self.options[body] = [o for o in opts if o is not leaf]

    def _composites_only(self):
        """A tensor the front end named a kernel for with ``only`` (ir/composites.py) is that
        kernel, and nothing else, on a backend that has it: its primitive form is what the kernel
        exists to avoid (a sort's rank matrix, n^2 memory on NumPy), so no genome, the generic
        one included, may take it. Other backends keep the primitive form; other composites are
        one more option for the search."""
        only = {(self.eg.node_of[c.node], c.name) for c in self.hlir.composites
                if c.only and c.node in self.eg.node_of}
        kept = set()
        for cls, name in only:
            opts = self.options.get(cls, ())
            kernel = next((n for n in opts if n.op == "Kernel" and self._tag(n) == name), None)
            if kernel is not None:
                self.options[cls] = [kernel] + [n for n in opts if n is not kernel]
                self.choosable[cls] = 1
                kept.add(cls)
        if not kept:
            return
        # nor may a reader compute it in its own kernel (the value's elementwise last steps, its
        # FT class, directly or through a view): it reads the kernel's buffer. A long static
        # scan's reader explored its doubling steps through views (seconds a genome)
        closed = set()
        for ft, opts in self.options.items():
            leaves = [n for n in opts if n.op == "FLeaf" and n.children[0] in kept]
            if leaves and self.eg.sorts.get(ft) == "FT":
                self.options[ft] = leaves
                closed.add(ft)
        for ft, (inner, _) in list(self.through.items()):
            if inner in closed:
                del self.through[ft]
                self.options[ft] = [n for n in self.options[ft] if n.op != VIEW_INLINE]

    def _reachable(self) -> set:
        """The IR and FT classes some genome can reach from the outputs (through any choosable
        option, view or view-inline). Others get no gene: a choice there changes no graph (a
        kernel named ``only`` leaves its primitive form unreachable, and a long static scan's
        35 genes made every genome extract again to the same graph)."""
        seen, stack = set(), list(self.eg.output_of.values())
        while stack:
            cls = stack.pop()
            if cls in seen:
                continue
            seen.add(cls)
            nodes = (self.options[cls][:self.n_choices(cls)] if cls in self.options
                     else self.eg.classes.get(cls, ()))
            if cls in self.views:  # (a view's class has no kernel of its own: its producer's)
                nodes = list(nodes) + [self.views[cls]]
            for n in nodes:
                if n.op == VIEW_INLINE:
                    stack.append(self.through[cls][0])
                stack.extend(c for c in n.children if isinstance(c, str) and c not in seen)
        return seen & self.options.keys()

    def n_choices(self, cls) -> int:
        return self.choosable.get(cls, len(self.options[cls]))

    def _demote(self, cls, which) -> None:
        """Options of ``cls`` that ``which(node)`` names become fallbacks (last, never chosen),
        as long as another option is left to choose."""
        opts = self.options.get(cls)
        if not opts or cls in self.choosable:
            return
        keep = [n for n in opts if not which(n)]
        if keep and len(keep) < len(opts):
            self.options[cls] = keep + [n for n in opts if which(n)]
            self.choosable[cls] = len(keep)

    def _divide_where_used(self):
        """A float ``a * recip(b)`` is computed by the kernel that multiplies, where every
        backend evaluates it as one correctly rounded ``a / b`` (ir.llir.quotient): a stored
        ``1 / b`` multiplied later rounds twice (``41 * (1 / 41)`` is 0.99999994; NumPy's divide
        gives 1). So no genome reads a stored reciprocal into a product, nor takes the primitive
        Mul over one; both stay as fallbacks (a view strides cannot compose, a tree too big).
        A reciprocal a backend kernel computes (a class with a Kernel option) is left alone."""
        def recip_class(cls):
            """The IR class of a float Recip no kernel implements, or of a folded 1 / c (a
            Constant that keeps its divisor), else None."""
            v = self.views.get(cls)
            cls = v.children[0] if v is not None else cls
            opts = self.options.get(cls, ())
            if not opts or not self.tensor(cls)[1].is_float:
                return None
            if opts[0].op == "Const":
                return cls if "divisor" in self.hlir.nodes[self.eg.literal(opts[0].children[0])].attrs else None
            if (any(n.op == "Un" and self._tag(n) == "Recip" for n in opts)
                    and not any(n.op == "Kernel" for n in opts)):
                return cls
            return None

        def stored_recip(n):
            return n.op == "FLeaf" and recip_class(n.children[0]) is not None

        for cls, opts in list(self.options.items()):
            for n in opts:
                if n.op == "FBin" and self._tag(n) == "Mul" and self.ft_dtype(cls).is_float:
                    for ft in n.children[1:]:
                        self._demote(ft, stored_recip)
                elif (n.op == "Bin" and self._tag(n) == "Mul" and self.tensor(cls)[1].is_float
                      and any(recip_class(c) is not None for c in n.children[1:])):
                    self._demote(cls, lambda m: m.op == "Bin")

    def _signature(self, cls, sigs):
        opts = (tuple((n.op, self._tag(n)) for n in self.options[cls]), self.n_choices(cls))
        if self.eg.sorts[cls] == "IR":
            node = self.node_in.get(cls)
            return ("IR", sigs[node.id] if node is not None else cls, opts)
        leaf = next((n for n in self.eg.classes[cls] if n.op == "FLeaf"), None)
        if leaf is None:
            return ("FT", cls, opts)
        target = leaf.children[0]
        view = self.views.get(target)
        producer = view.children[0] if view is not None else target
        node = self.node_in.get(producer)
        return ("FT", sigs[node.id] if node is not None else producer, view is not None, opts)

    def shared(self, ft):
        """The producer class of FT class ``ft`` when more than one HLIR node reads that tensor
        (inlining it into a kernel recomputes it there), else None."""
        if ft in self._shared_ft:
            return self._shared_ft[ft]
        leaf = next((n for n in self.eg.classes[ft] if n.op == "FLeaf"), None)
        hit = None
        if leaf is not None:
            view = self.views.get(leaf.children[0])
            producer = view.children[0] if view is not None else leaf.children[0]
            node = self.node_in.get(producer)
            if node is not None and self._readers.get(node.id, 0) > 1:
                hit = producer
        self._shared_ft[ft] = hit
        return hit

    def _tag(self, n):
        if n.children and self.eg.sorts.get(n.children[0]) == "String":
            return self.eg.literal(n.children[0])
        return None

    def _kernel_allowed(self, n) -> bool:
        if n.op != "Kernel":
            return True
        return self.eg.literal(n.children[0]) in self.kernel_kinds

    # ---- the search's view --------------------------------------------------------------------
    def space(self) -> ChoiceSpace:
        return ChoiceSpace(self.genes)

    def generic_genome(self) -> tuple:
        """The cheapest genome that uses no backend ``Kernel``: the library's own kernels
        (fused, fused_reduce, matmul, primitives). The search times it first, so backend kernels
        are checked against it rather than the other way round."""
        out = []
        for g in self.genes:
            opts = self.options[g.name][:g.n_options]
            out.append(next((i for i, n in enumerate(opts) if n.op != "Kernel"), 0))
        return tuple(out)

    def extract_keyed(self, genome) -> tuple:
        """(the genome's LLIR, its structural hash), kept: a genome that agrees with an earlier
        one at every gene that one's extraction read extracts to the same graph, which is taken
        without extracting again (a quarter of a Llama bucket's mutants; and each bucket's
        search starts from the same genomes). Callers must not change the graph."""
        genome = tuple(genome)
        for pick, values, llir, key in self._walks:
            if pick(genome) == values:
                return llir, key
        llir, (idx, values) = self.extract_reading(genome)
        key = llir.structural_hash()
        if len(self._walks) < WALKS_KEPT:
            self._walks.append((_picker(idx), values, llir, key))
        return llir, key

    def forget_extractions(self) -> None:
        """Drop what extract_keyed kept (their graphs: a search's hundreds of candidates)."""
        self._walks = []

    def kernel_genomes(self) -> list:
        """(See _kernel_genome_list: made once, each bucket's search starts with them.)"""
        if self._kernel_genomes is None:
            self._kernel_genomes = self._kernel_genome_list()
        return list(self._kernel_genomes)

    def _kernel_genome_list(self) -> list:
        """Genomes that take a rule's backend ``Kernel`` the cheapest genome passes over: where it
        recomputes the kernel's primitive form inside a fused consumer (the cost order inlines
        elementwise producers first, which bypasses e.g. dlrm_interact, a batched Gram matmul plus
        a gather that the concatenation would read through a view), and where the kernel sits
        in an e-class behind an option of equal cost (the decode attention in the AV product's
        class, behind its MatMul). One genome per kernel kind, those changing the fewest choices
        first (one hand kernel swapped in), then all kinds at once; the search times them right
        after the cheapest, so no hand kernel is lost to the cost order alone."""
        base = (0,) * len(self.genes)
        reads = {}  # kernel kind -> {gene index: option index that takes the kernel}
        for gi, g in enumerate(self.genes):
            opts = self.options[g.name][:g.n_options]
            for i, n in enumerate(opts):
                if i and n.op == "Kernel":  # offered in the class itself, not first
                    reads.setdefault(self.eg.literal(n.children[0]), {}).setdefault(gi, i)
            read = next((i for i, n in enumerate(opts) if n.op == "FLeaf"), None)
            if not read:
                continue  # no plain read, or reading is already the first choice
            target = opts[read].children[0]
            v = self.views.get(target)
            producer = v.children[0] if v is not None else target
            for n in self.options.get(producer, ()):
                if n.op == "Kernel":
                    reads.setdefault(self.eg.literal(n.children[0]), {})[gi] = read
        out, graphs = [], set()
        if reads:
            graphs.add(self.extract_keyed(base)[1])
        for changes in sorted(reads.values(), key=len) + ([{k: v for c in reads.values() for k, v in c.items()}]
                                                          if len(reads) > 1 else []):
            g = tuple(changes.get(i, x) for i, x in enumerate(base))
            h = self.extract_keyed(g)[1]  # a kernel already read, or repaired away
            if h not in graphs:
                graphs.add(h)
                out.append(g)
        return out

    def extract(self, genome=None) -> Graph:
        """The LLIR graph for ``genome`` (None: all zeros, the cheapest options)."""
        return self.extract_reading(genome)[0]

    def extract_reading(self, genome=None) -> tuple:
        """(the LLIR graph for ``genome``, (the indices of the genes its extraction read, their
        values)). Extraction reads the genome only there, so every genome with those values at
        those genes extracts to the same graph: a search's mutants that differ only in genes the
        walk never reached (a third of a Llama step's, say) need no extraction of their own."""
        genome = tuple(genome) if genome is not None else (0,) * len(self.genes)
        if len(genome) != len(self.genes):
            raise ValueError(f"genome has {len(genome)} choices for {len(self.genes)} genes")
        with deep_recursion(len(self.hlir)):
            walk = _Extraction(self, genome)
            graph = walk.run()
        idx = tuple(sorted(self._gene_index[name] for name in walk.read))
        return graph, (idx, tuple(genome[i] for i in idx))

    # ---- shapes and dtypes of classes ---------------------------------------------------------
    def tensor(self, cls):
        """(shape, dtype) of an IR class that holds an HLIR node."""
        node = self.node_in.get(cls)
        if node is None:
            raise ExtractionError(f"e-class {cls} holds no HLIR node, so its shape is unknown "
                                  "(a rule must union new kernels into an existing tensor's class)")
        return node.shape, node.dtype

    def plain_view(self, cls) -> View:
        """The contiguous view of an IR class's whole tensor (made once: every genome reads it)."""
        hit = self._plain_views.get(cls)
        if hit is None:
            hit = self._plain_views[cls] = View.contiguous(self.tensor(cls)[0])
        return hit

    def ft_dtype(self, cls) -> dt.DType:
        hit = self._ft_dtype.get(cls)
        if hit is not None:
            return hit
        self._ft_dtype[cls] = dt.float32  # provisional, breaks cycles
        nodes = self.eg.classes[cls]
        leaf = next((n for n in nodes if n.op == "FLeaf"), None)
        if leaf is not None:
            d = self.edge_dtype(leaf.children[0])
        else:
            n = nodes[0]
            if n.op == "FCast":
                d = dt.BY_NAME[self.eg.literal(n.children[1])]
            elif n.op == "FBin" and self.eg.literal(n.children[0]) == "LessThan":
                d = dt.bool_
            elif n.op == "FSel":
                d = self.ft_dtype(n.children[1])
            else:
                d = self.ft_dtype(n.children[-1])
        self._ft_dtype[cls] = d
        return d

    def edge_dtype(self, cls) -> dt.DType:
        v = self.views.get(cls)
        if v is not None:
            cls = v.children[0]
        return self.tensor(cls)[1]


WALKS_KEPT = 4096  # extractions extract_keyed keeps (a Llama compile's four buckets: ~250)


def _picker(idx: tuple):
    """genome -> the tuple of its values at ``idx`` (operator.itemgetter, always a tuple)."""
    if not idx:
        return lambda genome: ()
    get = operator.itemgetter(*idx)
    return get if len(idx) > 1 else (lambda genome: (get(genome),))


def _class_key(cls: str):
    sort, _, num = cls.rpartition("-")
    return (sort, int(num) if num.isdigit() else num)


class _Extraction(FusedTreeBuilder):
    """One genome's walk from the outputs."""

    def __init__(self, ex: Extractor, genome: tuple):
        self.ex = ex
        self.eg = ex.eg
        self.choice = {g.name: v for g, v in zip(ex.genes, genome)}
        self.g = Graph(ex.name)
        self.buf: dict = {}
        self.joins: dict = {}  # LLIR node -> the exact_joins piece its kernel is (zero outside a box)
        self.active: set = set()
        self.memo: dict = {}
        self.recomputing = 0  # shared values being inlined around the current tree node
        self.slack = 0  # extra reads the current kernel may still take to avoid storing a value
        self.visits = 0  # tree nodes the current kernel has visited (fused_tree.MAX_VISITS)
        # ViewThroughs from the current tree node's coordinates out to its kernel's (innermost
        # last): non-empty while computing a producer inlined through a view
        self.transform: tuple = ()
        self._ordered: dict = {}  # e-class -> its options, the genome's choice first
        self.read: set = set()  # the genes whose choice this walk read (Extractor.extract_reading)

    def run(self) -> Graph:
        ex, g = self.ex, self.g
        for hid in ex.hlir.inputs:
            n = ex.hlir.nodes[hid]
            nid = g.add("Input", (), n.shape, n.dtype, **n.attrs)
            cls = self.eg.node_of.get(hid)
            if cls is not None:
                self.buf.setdefault(cls, nid)
        for k, hid in enumerate(ex.hlir.outputs):
            out = ex.hlir.nodes[hid]
            cls = self.eg.output_of[out.attrs["index"]]
            src, view = self.edge(cls)
            g.add("Output", ((src, view),), out.shape, out.dtype, **out.attrs)
        return dce(g, owned=True)

    def ordered(self, cls) -> list:
        hit = self._ordered.get(cls)
        if hit is not None:
            return hit
        opts = self.ex.options.get(cls)
        if not opts:
            raise ExtractionError(f"e-class {cls} has no implementation this backend can run")
        gene = self.ex.gene_of.get(cls)
        k = 0
        if gene is not None:
            k = self.choice.get(gene, 0)
            self.read.add(gene)
        hit = self._ordered[cls] = [opts[k]] + opts[:k] + opts[k + 1:]  # (callers only read it)
        return hit

    # ---- tensors ------------------------------------------------------------------------------
    def edge(self, cls):
        """(LLIR producer id, View) for reading e-class ``cls``."""
        v = self.ex.views.get(cls)
        if v is not None:
            inner = v.children[0]
            if inner in self.ex.views:
                raise ExtractionError(f"a view of a view (e-class {cls}) cannot be extracted")
            return self.materialize(inner), self.ex.view_of(v)
        return self.materialize(cls), self.ex.plain_view(cls)

    def materialize(self, cls) -> int:
        hit = self.buf.get(cls)
        if hit is not None:
            return hit
        if cls in self.active:
            raise _Cycle()
        self.active.add(cls)
        try:
            for node in self.ordered(cls):
                try:
                    nid = self.build(cls, node)
                    break
                except _Cycle:
                    continue
            else:
                raise _Cycle()
        finally:
            self.active.discard(cls)
        self.buf[cls] = nid
        return nid

    def build(self, cls, n) -> int:
        ex, g, lit = self.ex, self.g, self.eg.literal
        shape, dtype = ex.tensor(cls)
        op, ch = n.op, n.children
        hnode = ex.node_in[cls]
        if op == "Inp":
            raise ExtractionError(f"input e-class {cls} was not bound to an argument")
        if op == "Const":
            src = ex.hlir.nodes[lit(ch[0])]
            return g.add("Constant", (), src.shape, src.dtype, **src.attrs)
        if op == "Iota":
            return g.add("Iota", (), (ex.expr(ch[1]),), dt.int32, expr=as_expr(ex.expr(ch[0])))
        if op == "Custom":
            src = ex.hlir.nodes[lit(ch[0])]
            ins = tuple((self.materialize(self.eg.node_of[i]), v) for i, v in src.inputs)
            return g.add("CustomOp", ins, shape, dtype, **src.attrs)
        if op in ("Cast", "Un", "Bin", "Sum", "Max", "Gath", "Scat"):
            prim, args, attrs = _primitive(op, ch, lit, hnode)
            edges = [self.edge(c) for c in args]
            if prim == "Add":  # two padded pieces of a join: a select, exact for -0.0
                add = ("Add", dtype.name, ("in", 0), ("in", 1))
                tree, piece = self.joined_tree(add, edges)
                if tree is not add:
                    return self.joined_node(g.add("CustomOp", tuple(edges), shape, dtype, name="fused", expr=tree),
                                            piece)
            return g.add(prim, tuple(edges), shape, dtype, **attrs)
        if op == "Fused":
            edges = []
            tree, piece = self.joined_tree(self.kernel_tree(ch[0], cls, edges), edges)
            return self.joined_node(g.add("CustomOp", tuple(edges), shape, dtype, name="fused", expr=tree), piece)
        if op == "FusedReduce":
            edges = []
            tree = self.kernel_tree(ch[1], cls, edges)
            if not edges:  # a sum of index values alone (an iota) has no input to size it by:
                raise _Cycle()  # repaired to the next option (the primitive reduction)
            in_shape = edges[0][1].shape
            return g.add("CustomOp", tuple(edges), shape, dtype, name="fused_reduce", expr=tree,
                         in_shape=tuple(in_shape), axis=lit(ch[2]), reduce=lit(ch[0]))
        if op == "MatMul":
            a, ashape, astr, aoff, b, bshape, bstr, boff = ch
            va = View(ex.elist(ashape), ex.elist(astr), ex.expr(aoff))
            vb = View(ex.elist(bshape), ex.elist(bstr), ex.expr(boff))
            ins = ((self.materialize(a), va), (self.materialize(b), vb))
            return g.add("CustomOp", ins, shape, dtype, name="matmul", m=va.shape[-2],
                         n=vb.shape[-1], k=va.shape[-1])
        if op == "Kernel":
            ins = [self.edge(c) for c in ex.cons_items(ch[1], "ICons", "INil")]
            return g.add("CustomOp", tuple(ins), shape, dtype, name=lit(ch[0]),
                         params=ex.elist(ch[2]))
        raise ExtractionError(f"cannot extract e-node {op} of e-class {cls}")

    def joined_tree(self, tree, edges):
        """exact_joins.join_tree over this kernel's input edges, with the joins other kernels
        made (a concatenation of three pieces may be two kernels)."""
        return join_tree(tree, [v for _, v in edges], [self.joins.get(src) for src, _ in edges])

    def joined_node(self, nid: int, piece) -> int:
        if piece is not None:
            self.joins[nid] = piece
        return nid


def _primitive(op, ch, lit, hnode):
    """(HLIR op name, tensor child classes, attrs) of a primitive e-node."""
    if op == "Cast":
        return "Cast", ch[:1], {}
    if op == "Un":
        return lit(ch[0]), ch[1:2], {}
    if op == "Bin":
        return lit(ch[0]), ch[1:3], {}
    if op in ("Sum", "Max"):
        return ("SumReduce" if op == "Sum" else "MaxReduce"), ch[:1], {"axis": lit(ch[1])}
    if op == "Gath":
        return "Gather", ch[:2], {}
    return "Scatter", ch[:3], {"mode": lit(ch[3])}

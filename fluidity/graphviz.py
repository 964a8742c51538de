"""Fluid's `fluid.graphviz`: a small builder of Graphviz DOT text for drawing programs
(`fluid.debugger.draw_block_graphviz` uses it).

`Graph(title)` collects nodes and edges and renders DOT (`code()` / `str()`); `compile(path)`
writes the DOT file and, when the Graphviz `dot` command is installed, a PDF beside it.
`GraphPreviewGenerator` draws parameters, arguments and ops with Fluid's shapes and colours.
Every label is quoted by `crepr`, so a variable name read from a hostile model file cannot
break out of its string into DOT syntax."""
import os
import shutil
import subprocess

__all__ = ["crepr", "Rank", "Graph", "Node", "Edge", "GraphPreviewGenerator"]


def crepr(v):
    """`v` as a double-quoted DOT string (backslashes, quotes and line breaks escaped)."""
    if isinstance(v, str):
        text = v.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + text.replace("\n", "\\n").replace("\r", "\\r") + '"'
    return str(v)


def _attrs(attrs):
    return ",".join(f"{k}={crepr(v)}" for k, v in attrs.items())


class Rank:
    """Nodes drawn on one level (`{rank=<kind>; a b ...}`)."""

    def __init__(self, kind, name, priority):
        self.kind, self.name, self.priority = kind, name, priority
        self.nodes = []

    def __str__(self):
        if not self.nodes:
            return ""
        return "{rank=%s;%s}" % (self.kind, ",".join(n.name for n in self.nodes))


class Node:
    counter = 1

    def __init__(self, label, prefix, description="", **attrs):
        self.label = label
        self.name = "%s_%d" % (prefix, Node.counter)
        self.description = description
        self.attrs = attrs
        Node.counter += 1

    def __str__(self):
        label = self.label + (("\n" + self.description) if self.description else "")
        return "%s [label=%s %s]" % (self.name, crepr(label),
                                    ("," + _attrs(self.attrs)) if self.attrs else "")


class Edge:
    def __init__(self, source, target, **attrs):
        self.source, self.target, self.attrs = source, target, attrs

    def __str__(self):
        return "%s -> %s %s" % (self.source.name, self.target.name,
                                ("[" + _attrs(self.attrs) + "]") if self.attrs else "")


class Graph:
    rank_counter = 0

    def __init__(self, title, **attrs):
        self.title = title
        self.attrs = attrs
        self.nodes, self.edges = [], []
        self.rank_groups = {}

    def code(self):
        return str(self)

    def rank_group(self, kind, priority):
        name = "rankgroup-%d" % Graph.rank_counter
        Graph.rank_counter += 1
        rank = Rank(kind, name, priority)
        self.rank_groups[name] = rank
        return name

    def node(self, label, prefix, description="", **attrs):
        rank = attrs.pop("rank", None)
        node = Node(label, prefix, description, **attrs)
        if rank is not None:
            self.rank_groups[rank].nodes.append(node)
        self.nodes.append(node)
        return node

    def edge(self, source, target, **attrs):
        edge = Edge(source, target, **attrs)
        self.edges.append(edge)
        return edge

    def compile(self, dot_path):
        """Write the DOT text to `dot_path`; with Graphviz installed, also render
        `<dot_path>.pdf`. Returns the PDF's path, or None when there is no `dot`."""
        with open(dot_path, "w") as f:
            f.write(self.code())
        dot = shutil.which("dot")
        if dot is None:
            return None
        pdf = os.path.splitext(dot_path)[0] + ".pdf"
        subprocess.run([dot, "-Tpdf", dot_path, "-o", pdf], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        return pdf

    def show(self, dot_path):
        """Render (as `compile`) and return the PDF's path; opening it is left to the
        caller's viewer."""
        return self.compile(dot_path)

    def _rank_repr(self):
        ranks = sorted(self.rank_groups.values(), key=lambda r: r.priority)
        return "\n".join(str(r) for r in ranks if r.nodes)

    def __str__(self):
        lines = ["digraph G {", "  label = %s" % crepr(self.title)]
        lines += ["  %s=%s;" % (k, crepr(v)) for k, v in self.attrs.items()]
        lines += ["  %s" % n for n in self.nodes]
        lines += ["  %s" % e for e in self.edges]
        rank = self._rank_repr()
        if rank:
            lines.append("  " + rank)
        lines.append("}")
        return "\n".join(lines) + "\n"


class GraphPreviewGenerator:
    """Draws a program as Fluid's preview does: parameters as boxes, arguments as ovals,
    ops as filled boxes; highlighted variables in another colour."""

    def __init__(self, title):
        self.graph = Graph(title, layout="dot", concentrate="true", rankdir="TB")
        self.op_rank = self.graph.rank_group("same", 2)
        self.param_rank = self.graph.rank_group("same", 1)
        self.arg_rank = self.graph.rank_group("same", 0)

    def __call__(self, path="temp.dot", show=False):
        return self.graph.show(path) if show else self.graph.compile(path)

    def add_param(self, name, data_type, highlight=False):
        label = "%s\n%s" % (name, data_type)
        return self.graph.node(label, prefix="param", shape="box", style="rounded,filled",
                               fillcolor="#8cc7cd" if highlight else "#a0a0a0",
                               fontcolor="#ffffff", fontname="Arial")

    def add_op(self, opType, **kwargs):  # noqa: N803 -- Fluid's argument name
        highlight = kwargs.pop("highlight", False)
        return self.graph.node(opType, prefix="op", description="", shape="box",
                               style="rounded, filled, bold",
                               color="#303A3A" if not highlight else "orange",
                               fontcolor="#ffffff", width="1.3", height="0.84",
                               fontname="Arial")

    def add_arg(self, name, highlight=False):
        return self.graph.node(name, prefix="arg", shape="box", style="rounded,filled,bold",
                               fontname="Arial", fontcolor="#999999",
                               color="orange" if highlight else "#dddddd")

    def add_edge(self, source, target, **kwargs):
        highlight = kwargs.pop("highlight", False)
        return self.graph.edge(source, target, color="orange" if highlight else "#000000",
                               **kwargs)

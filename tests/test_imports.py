"""The package's import graph: no loops, and arrows only the way the design allows.

    core <- ops <- ir <- {framework, executor, transpiler, codegen}

Every `import` in every module of `fluidity/` counts, also those inside functions (a lazy
import is still a dependency). The builder (framework, layers, backward, optimizer, io, ...)
sits above the IR; the runtime (executor), the passes (transpiler) and the code generator
never import it, and passes and codegen never import the runtime; `distributed` may import
the executor, never the reverse; an op module never imports distributed/, codegen/ or an RPC
library.
"""
import ast
import functools
import os

import pytest

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fluidity")

# first-level parts of the package -> their layer; a module of a layer may import only its
# own layer's modules and lower layers'.
LAYERS = {
    "errors": 0, "unique_name": 0, "proto": 0, "core": 0,
    "ops": 1, "datafeed": 1,
    "ir": 2,
    "framework": 3, "executor": 3, "transpiler": 3, "codegen": 3,
    "distributed": 4, "layer_helper": 4, "param_attr": 4, "initializer": 4, "layers": 4,
    "backward": 4, "regularizer": 4, "clip": 4, "optimizer": 4, "nets": 4, "io": 4,
    "compiler": 4, "data_feeder": 4, "reader": 4, "dataset": 4, "profiler": 4, "metrics": 4,
    "average": 4, "op": 4, "inference_api": 4,
    "install_check": 5, "cli": 5, "collect_env": 5, "incubate": 5, "contrib": 5, "dygraph": 5, "__init__": 5,
}
BUILDER = {"framework", "layer_helper", "param_attr", "initializer", "layers", "backward",
           "regularizer", "clip", "optimizer", "nets", "io", "compiler", "data_feeder", "reader",
           "dataset", "metrics"}
# (importer part, imported part) pairs forbidden although the layers would allow them
FORBIDDEN = {(a, b) for a in ("executor", "transpiler", "codegen") for b in BUILDER}
FORBIDDEN |= {("transpiler", "executor"), ("codegen", "executor"), ("executor", "distributed")}
FORBIDDEN |= {("ops", "distributed"), ("ops", "codegen")}
RPC_LIBS = {"grpc", "grpcio", "ray"}


def _modules():
    """{dotted module name: path} of every .py file under fluidity/."""
    mods = {}
    for root, _dirs, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py") and not f.endswith("_pb2.py"):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, os.path.dirname(PKG))[:-3].replace(os.sep, ".")
                mods[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return mods


def _imports(name, path, mods):
    """[(imported module, line)] of module `name`, resolved to modules of the package (or
    to a top-level outside name for absolute imports of other packages)."""
    is_pkg = path.endswith("__init__.py")
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = base[:len(base) - node.level + 1]
                target = ".".join(pkg + ([node.module] if node.module else []))
            else:
                target = node.module
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((sub if sub in mods else target, node.lineno))
    return out


def _part(mod):
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


@functools.lru_cache(maxsize=None)   # parsed once for the module's tests
def _graph():
    mods = _modules()
    edges = {}
    for name, path in mods.items():
        edges[name] = [(t, line) for t, line in _imports(name, path, mods)
                       if t.split(".")[0] != "fluidity" or t in mods]
    return mods, edges


def test_every_part_of_the_package_has_a_layer():
    mods, _ = _graph()
    assert sorted({_part(m) for m in mods} - set(LAYERS)) == []


def test_imports_run_one_way():
    mods, edges = _graph()
    bad = []
    for src, targets in edges.items():
        for dst, line in targets:
            top = dst.split(".")[0]
            if top != "fluidity":
                if top in RPC_LIBS and _part(src) in ("ops", "core", "ir"):
                    bad.append(f"{src}:{line} imports {dst}")
                continue
            a, b = _part(src), _part(dst)
            if a == b or b == "__init__" and dst == "fluidity":
                if dst == "fluidity" and a != "__init__":
                    bad.append(f"{src}:{line} imports the package itself")
                continue
            if LAYERS[b] > LAYERS[a] or (a, b) in FORBIDDEN:
                bad.append(f"{src}:{line} imports {dst} ({a} -> {b})")
    assert bad == []


def test_no_import_loops():
    """Strongly connected components of the module graph (Tarjan) of more than one module.
    A package's __init__ re-exporting its own modules is not an arrow back into it."""
    mods, edges = _graph()
    graph = {m: sorted({t for t, _ in edges[m] if t in mods and t != m
                        and not (m.startswith(t + ".") and mods[t].endswith("__init__.py"))
                        and not (t.startswith(m + ".") and mods[m].endswith("__init__.py"))})
             for m in mods}
    index, low, stack, on, loops = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                loops.append(sorted(comp))

    import sys
    sys.setrecursionlimit(10000)
    for m in graph:
        if m not in index:
            visit(m)
    assert loops == []


@pytest.mark.parametrize("src,dst", [("fluidity.executor.plan", "fluidity.framework"),
                                     ("fluidity.transpiler.fuse", "fluidity.executor.plan")])
def test_the_checker_sees_a_forbidden_arrow(src, dst):
    a, b = _part(src), _part(dst)
    assert (a, b) in FORBIDDEN or LAYERS[b] > LAYERS[a]

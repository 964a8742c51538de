"""No function of the code generator or the executors runs past LIMIT lines (docstring
included): the compiler's stages and the plans' steps stay readable at a glance."""
import ast
import os

import pytest
from paths import ROOT

LIMIT = 60
DIRS = ("fluidity/codegen", "fluidity/executor")


def _functions():
    for d in DIRS:
        for root, _, files in os.walk(os.path.join(ROOT, d)):
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                path = os.path.join(root, f)
                with open(path) as fh:
                    tree = ast.parse(fh.read(), path)
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield os.path.relpath(path, ROOT), node


def test_every_function_is_shorter_than_the_limit():
    long = [f"{path}:{n.lineno} {n.name}: {n.end_lineno - n.lineno + 1} lines"
            for path, n in _functions() if n.end_lineno - n.lineno + 1 >= LIMIT]
    assert long == []


def test_the_check_reads_the_tree():
    names = {n.name for _, n in _functions()}
    assert {"segment_block", "plan_buffers", "render_segment", "call"} <= names
    assert len(names) > 200


@pytest.mark.parametrize("d", DIRS)
def test_the_checked_folders_exist(d):
    assert os.path.isdir(os.path.join(ROOT, d))

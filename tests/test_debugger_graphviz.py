"""`fluid.debugger` (a program as code, a block as a DOT graph) and `fluid.graphviz`'s DOT
builder, whose quoting keeps a hostile variable name inside its label."""
import re

import fluidity as fluid
from fluidity import core, debugger, graphviz


def _program():
    p = fluid.Program()
    b = p.current_block()
    b.create_var(name="rows", dtype="float32", shape=[5, 10],
                 type=core.VarDesc.VarType.SELECTED_ROWS)
    x = b.create_parameter(dtype="float32", shape=[5, 10], name="mul.x")
    y = b.create_var(dtype="float32", shape=[10, 8], name='evil"] -> x [label="')
    out = b.create_var(dtype="float32", shape=[5, 8], name="mul.out")
    b.append_op(type="mul", inputs={"X": x, "Y": y}, outputs={"Out": out},
                attrs={"x_num_col_dims": 1})
    return p


def test_program_as_code():
    text = debugger.pprint_program_codes(_program())
    assert "mul.x : float32[5, 10] (persistable, parameter)" in text
    assert "rows : selected_rows float32[5, 10]" in text
    assert "= mul(" in text and "x_num_col_dims=1" in text


def test_block_as_dot_quotes_names(tmp_path):
    path = str(tmp_path / "g.dot")
    debugger.draw_block_graphviz(_program().block(0), highlights=["mul.out"], path=path)
    dot = open(path).read()
    assert dot.startswith("digraph G {") and dot.rstrip().endswith("}")
    assert '"evil\\"] -> x [label=\\""' in dot          # the quote is escaped, not DOT syntax
    edges = [ln for ln in dot.splitlines() if re.match(r"\s+\w+ -> \w+ \[", ln)]
    assert len(edges) == 3                              # x, y into mul; mul into out


def test_graph_builder():
    g = graphviz.Graph("t", rankdir="TB")
    a = g.node("a\nb", prefix="n", shape="box")
    c = g.node("c", prefix="n")
    g.edge(a, c, color="red")
    code = g.code()
    assert 'label="a\\nb"' in code and f"{a.name} -> {c.name}" in code
    assert graphviz.crepr('say "hi"') == '"say \\"hi\\""'

"""Fluid 1.8's readable program text (`_to_readable_code`) of variables, parameters, ops
(block attributes included), blocks and programs."""
import pytest

import fluidity as fluid


def _program():
    prog = fluid.Program()
    block = prog.current_block()
    x = block.create_var(name="X", shape=[-1, 23, 48], dtype="float32")
    block.create_parameter(name="W", shape=[23, 48], dtype="float32", trainable=False)
    block.append_op(type="abs", inputs={"X": [x]}, outputs={"Out": [x]})
    with fluid.program_guard(prog):
        a = fluid.layers.fill_constant(shape=[1], dtype="float32", value=0.1)
        b = fluid.layers.fill_constant(shape=[1], dtype="float32", value=0.2)
        fluid.layers.cond(fluid.layers.less_than(b, a),
                          lambda: fluid.layers.fill_constant([2], "int32", 2),
                          lambda: fluid.layers.fill_constant([2], "int32", -1))
    return prog


def test_lines():
    prog = _program()
    block = prog.global_block()
    assert block.var("X")._to_readable_code() == \
        "var X : fluid.VarType.LOD_TENSOR.shape(-1, 23, 48).astype(VarType.FP32)"
    assert block.var("W")._to_readable_code() == \
        "persist param W : fluid.VarType.LOD_TENSOR.shape(23, 48).astype(VarType.FP32)"
    abs_op = block.ops[0]
    text = abs_op._to_readable_code()
    assert text.startswith("{Out=['X']} = abs(inputs={X=['X']}, ")
    names = [part.split(" = ")[0] for part in text[text.index("}, ") + 3:-1].split(", ")]
    assert names == sorted(names)                 # attributes sorted by name
    cond = [op for op in block.ops if op.type == "conditional_block"][0]
    assert "sub_block = block[" in cond._to_readable_code()
    with pytest.raises(TypeError):
        abs_op._to_readable_code(skip_op_callstack="yes")


def test_block_and_program():
    prog = _program()
    text = prog._to_readable_code()
    assert text.count("{ // block ") == prog.num_blocks
    first = prog.global_block()._to_readable_code()
    assert text.startswith(first) and first.endswith("\n}")
    lines = first.splitlines()
    assert lines[0] == "{ // block 0" and "" in lines     # variables, a blank line, ops

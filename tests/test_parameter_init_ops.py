"""Block.create_parameter with an initializer: a parameter written by two init ops is
refused, but a collective program's in-place broadcast of it is not an init op (Fluid)."""
import numpy as np
import pytest

import fluidity as fluid


def _param(block, value=0.5):
    return block.create_parameter(initializer=fluid.initializer.Constant(value=value),
                                  shape=[2, 2], dtype="float32", name="w")


def test_broadcast_is_not_a_second_initializer():
    prog = fluid.Program()
    block = prog.current_block()
    w = _param(block)
    for t, attrs in (("c_broadcast", {"root": 0, "ring_id": 0, "use_calc_stream": False}),
                     ("c_sync_comm_stream", {"ring_id": 0})):
        block.append_op(type=t, inputs={"X": [w]}, outputs={"Out": [w]}, attrs=attrs)
    again = _param(block)
    assert again is w or again.name == "w"
    assert [op.type for op in block.ops] == ["fill_constant", "c_broadcast",
                                             "c_sync_comm_stream"]
    init = prog.clone()             # the initializer alone still runs as before
    init.global_block()._remove_op(2)
    init.global_block()._remove_op(1)
    scope = fluid.Scope()
    fluid.Executor().run(init, scope=scope)
    np.testing.assert_array_equal(np.asarray(scope.find_var("w").get_tensor()),
                                  np.full((2, 2), 0.5, np.float32))


def test_two_initializers_are_refused():
    prog = fluid.Program()
    block = prog.current_block()
    w = _param(block)
    block.append_op(type="fill_constant", outputs={"Out": [w]},
                    attrs={"shape": [2, 2], "dtype": w.dtype, "value": 1.0})
    with pytest.raises(RuntimeError, match="multiple init ops"):
        _param(block)

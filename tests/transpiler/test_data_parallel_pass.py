"""The data-parallel pass (transpiler/data_parallel.py): what each replica runs, as Fluid
1.x's multi-device graph pass builds it."""
import pytest

import fluidity as fluid
from fluidity import layers
from fluidity.ir.views import ProgramView
from fluidity.transpiler import data_parallel as dp


def _program(shared=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = layers.data("x", [3])
        y = layers.data("y", [1])
        attr = fluid.ParamAttr(name="w") if shared else None
        h = layers.fc(x, 3, param_attr=attr, bias_attr=False)
        if shared:       # the same weight twice: its gradient is a sum of two
            h = layers.fc(h, 3, param_attr=attr, bias_attr=False)
        pred = layers.fc(h, 1)
        loss = layers.mean(layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, loss


def _ops(desc):
    return [(op.type, op.input_arg_names, op.output_arg_names)
            for op in ProgramView(desc).global_block().ops]


def test_allreduce_follows_each_gradient_and_the_loss_gradient_is_scaled():
    main, loss = _program()
    before = main.desc.SerializeToString()
    out = dp.data_parallel(main.desc, 2, loss.name)
    assert main.desc.SerializeToString() == before        # a pure pass
    ops = ProgramView(out).global_block().ops
    types = [op.type for op in ops]
    grads = {g for op in main.global_block().ops if op.type == "sgd"
             for g in op.input("Grad")}
    reduced = [op for op in ops if op.type == "c_allreduce_sum"]
    assert {op.input("X")[0] for op in reduced} == grads and len(reduced) == len(grads)
    for op in reduced:
        g = op.input("X")[0]
        assert op.output("Out") == [g] and op.attr("op_role_var")[1] == g
        at = op.idx
        writers = [i for i, o in enumerate(ops) if g in o.output_arg_names and o is not op]
        assert writers[-1] == at - 1               # right after its last writer
    assert types.index("sgd") > max(op.idx for op in reduced)
    fill = [op for op in ops if op.type == "fill_constant" and
            op.output("Out") == [loss.name + "@GRAD"]]
    assert len(fill) == 1 and fill[0].attr("value") == 0.5
    # everything else is the program as it was
    rest = [t for t in _ops(out) if t[0] != "c_allreduce_sum"]
    assert rest == _ops(main.desc)


def test_strategies_and_one_place():
    main, loss = _program()
    assert _ops(dp.data_parallel(main.desc, 1, loss.name)) == _ops(main.desc)
    one = ProgramView(dp.data_parallel(main.desc, 4, loss.name, gradient_scale=dp.ONE))
    fill = [op for op in one.global_block().ops if op.type == "fill_constant" and
            op.output("Out") == [loss.name + "@GRAD"]][0]
    assert fill.attr("value") == 1.0
    custom = ProgramView(dp.data_parallel(main.desc, 4, loss.name,
                                          gradient_scale=dp.CUSTOMIZED))
    assert not [op for op in custom.global_block().ops
                if loss.name + "@GRAD" in op.output_arg_names and op.type == "fill_constant"]
    reduced = ProgramView(dp.data_parallel(main.desc, 4, loss.name,
                                           reduce_strategy=dp.REDUCE))
    ops = [op for op in reduced.global_block().ops if op.type.startswith("c_")]
    assert ops and all(op.type == "c_reduce_sum" and op.attr("root_id") == 0 for op in ops)
    # no loss named: the gradient stays 1 (Fluid scales only a named loss's)
    unnamed = ProgramView(dp.data_parallel(main.desc, 4))
    assert [op.attr("value") for op in unnamed.global_block().ops
            if op.type == "fill_constant"][0] == 1.0
    with pytest.raises(ValueError):
        dp.data_parallel(main.desc, 0)
    with pytest.raises(ValueError):
        dp.data_parallel(main.desc, 2, loss.name, gradient_scale=7)
    with pytest.raises(fluid.errors.ProgramError, match="not a variable"):
        dp.data_parallel(main.desc, 2, "nope")


def test_a_shared_parameter_is_reduced_once_after_its_gradients_are_summed():
    main, loss = _program(shared=True)
    ops = ProgramView(dp.data_parallel(main.desc, 2, loss.name)).global_block().ops
    w = [op for op in ops if op.type == "c_allreduce_sum" and op.input("X") == ["w@GRAD"]]
    assert len(w) == 1
    writers = [i for i, op in enumerate(ops) if "w@GRAD" in op.output_arg_names]
    assert writers[-1] == w[0].idx
    assert ops[w[0].idx - 1].type == "sum"


def test_training_and_backward_questions():
    main, loss = _program()
    assert dp.has_backward(main.desc) and dp.is_training(main.desc)
    test = main.clone(for_test=True)
    assert not dp.has_backward(test.desc) and not dp.is_training(test.desc)

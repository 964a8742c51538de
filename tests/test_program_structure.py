"""Programs built as Fluid 1.8 builds them, where Fluid programs and tests look at the
structure: the op list `minimize` returns (a `scale` for a parameter's own learning rate,
the update op, the ops that finish the step), the optimizer's accumulators, the order of
the startup program's init ops (prepended, as Fluid's initializers do), where
`Block.create_parameter(initializer=)` puts the init op, and the attributes on every op."""
import pytest

import fluidity as fluid
from fluidity import optimizer
from fluidity.core.names import OpRole

L = fluid.layers
COMMON = {"op_role", "op_role_var", "op_namescope", "op_callstack", "op_device"}


def _mean_of_mul(lr_factor):
    """Fluid's test network: mean(mul(x, y)) with x a parameter of its own learning rate."""
    program, init = fluid.Program(), fluid.Program()
    block = program.global_block()
    x = block.create_parameter(name="mul.x", shape=[5, 10], dtype="float32",
                               optimize_attr={"learning_rate": lr_factor})
    y = block.create_var(name="mul.y", shape=[10, 8], dtype="float32")
    out = block.create_var(name="mul.out", shape=[5, 8], dtype="float32")
    mean = block.create_var(name="mean.out", shape=[1], dtype="float32")
    block.append_op("mul", {"X": x, "Y": y}, {"Out": out}, {"x_num_col_dims": 1})
    block.append_op("mean", {"X": out}, {"Out": mean})
    return program, init, x, mean


@pytest.mark.parametrize("opt, want", [
    (lambda: optimizer.SGD(0.01), ["sgd"]),
    (lambda: optimizer.Momentum(0.01, 0.2), ["momentum"]),
    (lambda: optimizer.Adam(0.01), ["adam"]),
    (lambda: optimizer.Adamax(0.01), ["adamax", "scale"]),
    (lambda: optimizer.Adagrad(0.01), ["adagrad"]),
    (lambda: optimizer.Ftrl(0.01), ["ftrl"])], ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("factor", [1.0, 1.1])
def test_minimize_returns_the_ops_it_appended(opt, want, factor):
    program, init, x, mean = _mean_of_mul(factor)
    ops, params_grads = opt().minimize(mean, init)
    assert [op.type for op in ops] == (["scale"] if factor != 1.0 else []) + want
    assert ops == program.global_block().ops[-len(ops):]
    if factor != 1.0:
        assert ops[0].attr("scale") == pytest.approx(factor)
        assert ops[0].attr("op_role") == OpRole.Optimize | OpRole.LRSched
    update = ops[1 if factor != 1.0 else 0]
    assert update.attr("op_role_var") == ["mul.x", "mul.x@GRAD"]


def test_accumulators_and_the_startup_order_are_fluids():
    program, init, x, mean = _mean_of_mul(1.1)
    opt = optimizer.Momentum(0.01, 0.2)
    with fluid.program_guard(program, init):
        ops = opt.apply_gradients(fluid.backward.append_backward(mean))
    assert [op.type for op in ops] == ["scale", "momentum"]
    acc = opt._accumulators
    assert list(acc) == [opt._velocity_acc_str] and list(acc["velocity"]) == ["mul.x"]
    assert acc["velocity"]["mul.x"].name.startswith("mul.x_velocity")
    init_ops = init.global_block().ops               # prepended: the learning rate first
    assert [(op.type, op.attr("value")) for op in init_ops] == \
        [("fill_constant", pytest.approx(0.01)), ("fill_constant", 0.0)]
    adam_init = fluid.Program()
    p2, _, _, m2 = _mean_of_mul(1.0)
    with fluid.program_guard(p2, adam_init):
        optimizer.Adam(0.01).minimize(m2)
    assert len(adam_init.global_block().ops) == 5
    assert adam_init.global_block().ops[0].attr("value") == pytest.approx(0.01)


def test_initializers_prepend_as_fluid():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3])
        L.fc(x, 2, param_attr=fluid.ParamAttr(name="w1"), bias_attr=fluid.ParamAttr(name="b1"))
        L.fc(x, 2, param_attr=fluid.ParamAttr(name="w2"), bias_attr=False)
    assert [op.output_arg_names[0] for op in startup.global_block().ops] == ["w2", "b1", "w1"]


def test_create_parameter_with_an_initializer_on_the_main_block():
    main = fluid.Program()
    b = main.global_block()
    p = b.create_parameter(name="fc.w", shape=[3, 2], dtype="float32",
                           initializer=fluid.initializer.ConstantInitializer(1.0625))
    assert [op.type for op in b.ops] == ["fill_constant"]     # in this block, as Fluid's
    got, = fluid.Executor().run(main, fetch_list=[p], scope=fluid.Scope())
    assert (got == 1.0625).all()
    # a second call does not add a second init op
    b.create_parameter(name="fc.w", shape=[3, 2], dtype="float32",
                       initializer=fluid.initializer.ConstantInitializer(2.0))
    assert len(b.ops) == 1
    sub = main._create_block()
    q = sub.create_parameter(name="q", shape=[2], dtype="float32")
    main._rollback()
    assert "q" in b.vars and "q" not in sub.vars and q.block is b
    for bad in (dict(shape=None), dict(shape=[1], dtype=None), dict(shape=[]),
                dict(shape=[-1])):
        with pytest.raises(ValueError):
            b.create_parameter(**{"name": "bad", "dtype": "float32", **bad})


def test_every_op_carries_fluids_common_attributes():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3])
        with fluid.name_scope("block1"):
            h = L.fc(x, 2)
        loss = L.mean(h)
        optimizer.SGD(0.1, regularization=fluid.regularizer.L2Decay(0.1)).minimize(loss)
    for prog in (main, startup):
        for op in prog.global_block().ops:
            assert COMMON <= set(op.attr_names), (op.type, op.attr_names)
    ops = main.global_block().ops
    assert ops[0].attr("op_namescope") == "/block1/" and ops[-1].attr("op_namescope") != ""
    reg = [op for op in ops if "regularization" in op.attr("op_namescope")]
    assert reg and all(len(op.attr("op_role_var")) == 2 for op in reg)

"""A missing feed and an empty batch fail before any op runs, naming the variable, the op
that needs it, the input slot and the shape."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import FeedError


def _net(kind):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        counter = fluid.layers.create_global_var([1], 0.0, "float32", persistable=True,
                                                 name="counter")
        fluid.layers.increment(counter, 1.0, in_place=True)   # an op with a lasting effect
        x = fluid.layers.data("x", [3, 8, 8])
        y = {"conv2d": lambda: fluid.layers.conv2d(x, 4, 3),
             "mul": lambda: fluid.layers.fc(x, 4),
             "pool2d": lambda: fluid.layers.pool2d(x, 2)}[kind]()
        loss = fluid.layers.mean(y)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    return exe, main, loss, scope


@pytest.mark.parametrize("kind, slot", [("conv2d", "Input"), ("mul", "X"), ("pool2d", "X")])
def test_missing_feed_names_variable_and_op_before_running(kind, slot):
    exe, main, loss, scope = _net(kind)
    with pytest.raises(FeedError, match=rf"variable 'x' has no value, and op #1 '{kind}' in "
                                        rf"block 0 needs it \(input {slot}\).*nothing is fed"):
        exe.run(main, fetch_list=[loss], scope=scope)
    assert scope.find_var("counter").get_tensor().numpy().tolist() == [0.0]  # nothing ran
    exe.run(main, feed={"x": np.ones((2, 3, 8, 8), np.float32)}, fetch_list=[loss], scope=scope)
    assert scope.find_var("counter").get_tensor().numpy().tolist() == [1.0]


@pytest.mark.parametrize("kind, slot", [("conv2d", "Input"), ("mul", "X"), ("pool2d", "X")])
def test_empty_batch_names_op_input_and_shape(kind, slot):
    exe, main, loss, scope = _net(kind)
    with pytest.raises(FeedError, match=rf"feed 'x' is an empty batch: shape \[0, 3, 8, 8\], "
                                        rf"no example; op #1 '{kind}' in block 0 cannot take it "
                                        rf"as input {slot}"):
        exe.run(main, feed={"x": np.zeros((0, 3, 8, 8), np.float32)}, fetch_list=[loss],
                scope=scope)
    assert scope.find_var("counter").get_tensor().numpy().tolist() == [0.0]


def test_empty_sequences_are_not_an_empty_batch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = fluid.layers.embedding(ids, [10, 4])
        pooled = fluid.layers.sequence_pool(emb, "sum")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    t = fluid.LoDTensor()
    t.set(np.zeros((0, 1), np.int64), fluid.CPUPlace())
    t.set_lod([[0, 0, 0]])               # two examples, both empty sequences
    (out,) = exe.run(main, feed={"ids": t}, fetch_list=[pooled])
    assert out.shape == (2, 4) and not out.any()


def test_a_value_left_in_the_scope_counts_as_given():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [2])
        y = fluid.layers.scale(x, 2.0)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(main, feed={"x": np.ones((1, 2), np.float32)}, fetch_list=[y], scope=scope,
            create_local_scope=False)
    (out,) = exe.run(main, fetch_list=[y], scope=scope, create_local_scope=False)
    assert out.tolist() == [[2.0, 2.0]]


def test_an_empty_tensor_made_inside_the_program_is_named_when_its_op_fails():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3, 8, 8])
        y = fluid.layers.conv2d(fluid.layers.scale(x, 2.0), 4, 3)  # scale takes an empty x
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with pytest.raises(fluid.errors.ExecutionError,
                       match=r"op #1 'conv2d' in block 0 cannot run on an empty input: Input "
                             r"'scale_\d+.tmp_0' \[0, 3, 8, 8\] hold\(s\) no elements"):
        exe.run(main, feed={"x": np.zeros((0, 3, 8, 8), np.float32)}, fetch_list=[y])


def test_ops_that_compute_on_empty_inputs_still_take_them():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.reduce_sum(fluid.layers.scale(x, 2.0))
    exe = fluid.Executor(fluid.CPUPlace())
    (out,) = exe.run(main, feed={"x": np.zeros((0, 4), np.float32)}, fetch_list=[y])
    assert np.asarray(out).size == 1 and np.asarray(out).sum() == 0.0


def test_a_python_scalar_is_fed_as_one_element_of_the_variables_dtype():
    """As Fluid 1.x's executor: `feed={'lr': 0.01}` to a fluid.data [1] float32 variable is
    [0.01] of float32 (an int too); a variable declared [] (a Paddle 2.5+ program) gets 0-D."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = fluid.data("lr", [1], "float32")
        out = fluid.layers.scale(lr, 2.0)
        zero_d = main.global_block().create_var(name="z", shape=[], dtype="float32",
                                                 need_check_feed=True)
        z2 = fluid.layers.scale(zero_d, 3.0)
    exe = fluid.Executor(fluid.CPUPlace())
    for value in (0.25, 1):
        r, = exe.run(main, feed={"lr": value, "z": 1.0}, fetch_list=[out], return_numpy=False)
        assert r.shape() == [1] and r._dtype() == fluid.core.VarDesc.VarType.FP32
        np.testing.assert_array_equal(np.array(r), [2.0 * value])
    z, = exe.run(main, feed={"lr": 0.25, "z": 2.0}, fetch_list=[z2])
    assert np.asarray(z).shape == () and float(z) == 6.0

"""Fluid 1.8 behaviours that PaddlePaddle/models v1.8.0's NLP scripts rely on, each found by
running one of those scripts (mechanically re-imported) on synthetic data."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.names import OpRole


def _roles(program):
    return [(op.type, op.attr("op_role"), list(op.attr("op_role_var"))) for op in program.global_block().ops]


def test_lr_schedule_guard_marks_learning_rate_ops():
    # the Transformer's train.py builds its noam decay inside _lr_schedule_guard()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        before = len(main.global_block().ops)
        with main._lr_schedule_guard():
            lr = fluid.layers.noam_decay(8, 10)
        n_lr = len(main.global_block().ops)
        with main._lr_schedule_guard(is_with_opt=True):
            fluid.layers.scale(lr, 2.0)
        fluid.layers.scale(x, 3.0)
    roles = _roles(main)
    assert n_lr > before
    assert all(r == int(OpRole.LRSched) and v == [] for _, r, v in roles[before:n_lr])
    assert roles[n_lr][1] == int(OpRole.LRSched) | int(OpRole.Optimize)
    assert roles[-1][1] == int(OpRole.Forward)  # the guard is left behind on exit


def test_optimized_guard_records_param_and_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.fc(x, 2)
        p = main.global_block().all_parameters()[0]
        with main._optimized_guard([p, "w@GRAD"]):
            fluid.layers.scale(y, 0.5)
        fluid.layers.scale(y, 2.0)
    roles = _roles(main)
    assert roles[-2][1:] == (int(OpRole.Optimize), [p.name, "w@GRAD"])
    assert roles[-1][1:] == (int(OpRole.Forward), [])


def test_lr_schedule_guard_leaves_no_role_after_an_error():
    main = fluid.Program()
    with pytest.raises(RuntimeError):
        with main._lr_schedule_guard():
            raise RuntimeError("boom")
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [4])
        fluid.layers.scale(x, 3.0)
    assert _roles(main)[-1][1:] == (int(OpRole.Forward), [])


def _loader_program(value):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 2], "float32")
        loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=4, iterable=False)
        y = fluid.layers.scale(x, 1.0)
    loader.set_batch_generator(lambda: iter([[np.full((1, 2), value, "float32")]] * 2))
    return main, loader, y


def test_loaders_built_under_fresh_unique_name_guards_keep_their_own_queues():
    # BERT's train.py builds its train and test programs alike, each under a fresh
    # unique_name.guard(): the two non-iterable loaders must not share one queue (the train
    # program then waited forever on the test loader's queue)
    train, train_loader, ty = _loader_program(1.0)
    test, test_loader, vy = _loader_program(2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    train_loader.start()
    test_loader.start()     # both started first: a shared queue fails here, not hangs
    (out,) = exe.run(train, fetch_list=[ty])
    np.testing.assert_array_equal(out, np.full((1, 2), 1.0, "float32"))
    seen = []
    while True:
        try:
            seen.append(exe.run(test, fetch_list=[vy])[0])
        except fluid.core.EOFException:
            test_loader.reset()
            break
    assert [float(s[0, 0]) for s in seen] == [2.0, 2.0]
    (out,) = exe.run(train, fetch_list=[ty])     # the train loader's pass goes on
    np.testing.assert_array_equal(out, np.full((1, 2), 1.0, "float32"))
    with pytest.raises(fluid.core.EOFException):
        exe.run(train, fetch_list=[ty])
    train_loader.reset()
    names = [op.output("Out")[0] for p in (train, test) for op in p.global_block().ops
             if op.type == "create_py_reader"]
    assert len(set(names)) == 2


def test_startup_program_holds_parameters_and_loads_a_saved_checkpoint(tmp_path):
    # BERT's run_classifier resumes with fluid.load(startup_prog, ckpt) from a checkpoint
    # that fluid.save(train_program) wrote: the startup program's variables must be
    # Parameters (as Fluid's layers make them) for .pdparams to be where they are read from
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        loss = fluid.layers.mean(fluid.layers.fc(x, 2))
        fluid.optimizer.Adam(0.1).minimize(loss)
    names = {p.name for p in main.global_block().all_parameters()}
    assert {p.name for p in startup.global_block().all_parameters()} == names
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[loss])
        saved = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
        fluid.save(main, str(tmp_path / "ckpt"))
    fresh = fluid.Scope()
    with fluid.scope_guard(fresh):
        exe.run(startup)
        fluid.load(startup, str(tmp_path / "ckpt"), exe)
        for n, v in saved.items():
            np.testing.assert_array_equal(np.array(fresh.find_var(n).get_tensor()), v)


def test_io_batch_takes_a_float_batch_size_as_fluid_does():
    # sentiment_classification passes args.batch_size / dev_count (16.0)
    batches = list(fluid.io.batch(lambda: iter(range(5)), 2.0)())
    assert batches == [[0, 1], [2, 3], [4]]
    for bad in (0.0, -2.0, float("nan"), "2", True):
        with pytest.raises(ValueError, match="batch_size"):
            fluid.io.batch(lambda: iter(range(5)), bad)

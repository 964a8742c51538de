"""A learning-rate schedule in async mode (transpiler/async_lr.py): the servers step it by
the trainers' step counts. With one trainer an async job applies each step's gradients with
that step's rate, so it must equal training in one process, step for step."""
import threading

import numpy as np
import pytest

import fluidity as fluid
from fluidity.distributed.launch import free_ports


def _build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        y = fluid.layers.data(name="y", shape=[1], dtype="float32")
        pred = fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(name="w"),
                               bias_attr=fluid.ParamAttr(name="b"))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        lr = fluid.layers.exponential_decay(learning_rate=0.5, decay_steps=2,
                                            decay_rate=0.5, staircase=True)
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, loss


def _batches(n):
    rng = np.random.RandomState(0)
    return [(rng.uniform(-1, 1, (8, 4)).astype("float32"),
             rng.uniform(-1, 1, (8, 1)).astype("float32")) for _ in range(n)]


def _params(scope):
    return {n: np.array(scope.find_var(n).get_tensor()) for n in ("w", "b")}


def test_async_schedule_matches_one_process():
    steps = _batches(6)
    main, startup, loss = _build()
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    init = _params(scope)
    for x, y in steps:
        exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss], scope=scope)
    want = _params(scope)

    main, startup, loss = _build()
    (port,) = free_ports(1)
    ep = f"127.0.0.1:{port}"
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup, pservers=ep, trainers=1,
                sync_mode=False)
    pmain, pstart = t.get_pserver_programs(ep)
    lr_block = pmain.global_block().ops[-1].attr("lr_decay_block_id")
    assert [op.type for op in pmain.block(lr_block).ops][0] == "sum"
    pscope, errors = fluid.Scope(), []
    fluid.Executor().run(pstart, scope=pscope)

    def serve():
        try:
            fluid.Executor().run(pmain, scope=pscope)
        except Exception as e:     # noqa: BLE001 - reported below
            errors.append(e)
    server = threading.Thread(target=serve, daemon=True)
    server.start()
    trainer = t.get_trainer_program()
    tscope = fluid.Scope()
    texe = fluid.Executor()
    texe.run(startup, scope=tscope)
    for k, v in _params(tscope).items():        # the servers' initial values
        np.testing.assert_array_equal(v, init[k])
    for x, y in steps:
        texe.run(trainer, feed={"x": x, "y": y}, fetch_list=[loss], scope=tscope)
    got = _params(tscope)
    texe.close()
    server.join(20)
    assert not errors, errors
    # the server counted the six steps: begin (0) + 6
    assert int(np.array(pscope.find_var("@LR_DECAY_COUNTER@").get_tensor())[0]) == 6
    for k in want:
        assert not np.allclose(want[k], init[k])
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)   # the same float ops


def test_a_schedule_without_one_counter_is_refused():
    main, startup, _loss = _build()
    inc = [op for op in main.global_block().ops if op.type == "increment"][0]
    main.global_block().append_op(type="increment", inputs={"X": inc.input("X")},
                                  outputs={"Out": inc.input("X")},
                                  attrs={"step": 1.0, "op_role": 16})
    with pytest.raises(NotImplementedError, match="one step counter"):
        fluid.DistributeTranspiler().transpile(0, program=main, startup_program=startup,
                                               pservers="127.0.0.1:1", trainers=1,
                                               sync_mode=False)

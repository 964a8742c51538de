"""The trainer's startup program of a job with sparsely updated tables: their initializers
become `fake_init` (the servers hold the tables; the trainer receives them), as Fluid 1.8's
get_trainer_program does, and fake_init keeps a value already received."""
import numpy as np
import pytest

import fluidity as fluid


def _net(shared_init_twice=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64", lod_level=1)
        a = fluid.layers.embedding(ids, size=[20000, 4], is_sparse=True,
                                   param_attr=fluid.ParamAttr(name="emb_a"))
        b = fluid.layers.embedding(ids, size=[20000, 4], is_sparse=True,
                                   param_attr=fluid.ParamAttr(name="emb_b"))
        c = fluid.layers.embedding(ids, size=[50, 4], is_sparse=False,
                                   param_attr=fluid.ParamAttr(name="dense"))
        loss = fluid.layers.mean(fluid.layers.elementwise_add(
            fluid.layers.elementwise_add(a, b), c))
        fluid.optimizer.SGD(0.1).minimize(loss)
        if shared_init_twice:
            startup.global_block().append_op(
                type="fill_constant", outputs={"Out": [startup.global_block().var("emb_b")]},
                attrs={"shape": [20000, 4], "dtype": 5, "value": 0.0})
    return main, startup


def _transpile(main, startup):
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup,
                pservers="127.0.0.1:6174,127.0.0.1:6175", trainers=2)
    return t


def test_sparse_tables_are_fake_initialized():
    main, startup = _net()
    t = _transpile(main, startup)
    t.get_trainer_program()
    t.get_trainer_program()          # twice: nothing more changes
    ops = startup.global_block().ops
    fakes = [(op.output("Out")[0], list(op.attr("shape"))) for op in ops
             if op.type == "fake_init"]
    assert fakes == [("emb_a", [20000, 4]), ("emb_b", [20000, 4])]
    # the dense table keeps its initializer; the tables lose theirs
    writers = {n: [op.type for op in ops if n in op.output_arg_names]
               for n in ("emb_a", "emb_b", "dense")}
    assert "fake_init" not in writers["dense"] and len(writers["dense"]) >= 1
    assert writers["emb_a"][-1] == "fake_init"
    assert [op.type for op in ops].index("fake_init") > max(
        i for i, op in enumerate(ops) if op.type == "recv")


def test_two_initializers_of_a_table_are_refused():
    main, startup = _net(shared_init_twice=True)
    t = _transpile(main, startup)
    with pytest.raises(ValueError, match="emb_b"):
        t.get_trainer_program()


def test_fake_init_keeps_a_received_value():
    prog = fluid.Program()
    w = prog.global_block().create_var(name="w", shape=[3, 2], dtype="float32",
                                       persistable=True)
    prog.global_block().append_op(type="fake_init", outputs={"Out": [w]},
                                  attrs={"shape": [3, 2]})
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(prog, scope=scope)                      # nothing there: zeros of the shape
    np.testing.assert_array_equal(np.array(scope.find_var("w").get_tensor()),
                                  np.zeros((3, 2), np.float32))
    got = np.arange(6, dtype=np.float32).reshape(3, 2)
    scope.find_var("w").get_tensor().set(got, fluid.CPUPlace())
    exe.run(prog, scope=scope)                      # a received value is kept
    np.testing.assert_array_equal(np.array(scope.find_var("w").get_tensor()), got)

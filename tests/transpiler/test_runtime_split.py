"""Fluid 1.8's runtime_split_send_recv: the trainer sends each sliced gradient whole (the
send op cuts it: `sections`, `send_varnames`) and receives each sliced parameter whole (the
recv op joins it: `recv_varnames`); listen_and_serv names the mode (0 sync, 1 async, 2 half
async). The numbers are checked end to end in tests/distributed/test_dist_training.py."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.errors import ExecutionError
from fluidity.ops.dist_ops import split_by_sections

EPS = "127.0.0.1:6174,127.0.0.1:6175"


def _job(sync, split):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[100], dtype="float32")
        y = fluid.layers.fc(x, 200, param_attr=fluid.ParamAttr(name="w"),
                            bias_attr=fluid.ParamAttr(name="b"))
        fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(y))
    config = fluid.DistributeTranspilerConfig()
    if not sync or split:
        config.sync_mode = False
    config.runtime_split_send_recv = split
    t = fluid.DistributeTranspiler(config)
    t.transpile(0, program=main, startup_program=startup, pservers=EPS, trainers=2,
                sync_mode=sync)
    return t


@pytest.mark.parametrize("sync", [True, False])
def test_split_layout(sync):
    t = _job(sync, split=True)
    ops = t.get_trainer_program().global_block().ops
    types = [op.type for op in ops]
    assert "split_byref" not in types and "concat" not in types
    (send_w,) = [op for op in ops if op.type == "send" and op.input("X") == ["w@GRAD"]]
    assert list(send_w.attr("sections")) == [50, 50]
    suffix = ".trainer_0" if sync else ""
    assert list(send_w.attr("send_varnames")) == [f"w@GRAD.block0{suffix}",
                                                  f"w@GRAD.block1{suffix}"]
    (recv_w,) = [op for op in ops if op.type == "recv" and op.output("Out") == ["w"]]
    assert list(recv_w.attr("recv_varnames")) == ["w.block0", "w.block1"]
    # each block comes from the server its gradient block went to, both servers used
    assert list(recv_w.attr("epmap")) == list(send_w.attr("epmap"))
    assert sorted(recv_w.attr("epmap")) == sorted(EPS.split(","))
    lis = t.get_pserver_program(EPS.split(",")[0]).global_block().ops[0]
    assert lis.attr("distributed_mode") == (0 if sync else 1)


def test_without_split_the_trainer_cuts_and_joins():
    t = _job(sync=False, split=False)
    types = [op.type for op in t.get_trainer_program().global_block().ops]
    assert "split_byref" in types and types[-1] == "concat"
    lis = t.get_pserver_program(EPS.split(",")[1]).global_block().ops[0]
    assert lis.attr("distributed_mode") == 2          # half async, as Fluid 1.8 names it


def test_split_by_sections_dense_and_sparse():
    a = np.arange(12, dtype=np.float32).reshape(6, 2)
    parts = split_by_sections(LoDTensor(a), [4, 2], "send")
    np.testing.assert_array_equal(parts[0]._array, a[:4])
    np.testing.assert_array_equal(parts[1]._array, a[4:])
    sr = SelectedRows(np.array([5, 0, 3, 5]), 6, a[:4])
    lo, hi = split_by_sections(sr, [4, 2], "send")
    assert list(lo.rows) == [0, 3] and lo.height == 4
    assert list(hi.rows) == [1, 1] and hi.height == 2          # renumbered in the block
    np.testing.assert_array_equal(hi.value, a[[0, 3]])
    with pytest.raises(ExecutionError, match="do not add up"):
        split_by_sections(LoDTensor(a), [4, 3], "send")
    with pytest.raises(ExecutionError, match="height"):
        split_by_sections(SelectedRows(np.array([9]), 6, a[:1]), [4, 2], "send")

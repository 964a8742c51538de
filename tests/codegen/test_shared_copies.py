"""Copies the buffer plan leaves out (Emit.copy_code, codegen/buffers.py): a value an op only
copies (elementwise_add's dX, a reshape's Out and its gradient) takes its source's arena slot
when no later op reads the source, and the copy is not emitted; where something still reads
the source (a later op, a fetch), the copy stays. Either way the compiled step gives the
interpreter's values bit for bit (a shared slot changes where a value lives, not how it is
computed)."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen import buffers
from fluidity.codegen.lower import Lowering

from compiled_runs import train


def _net(reuse_source=False, train=True):
    """fc 6 (mul + bias add) -> reshape2 to [-1, 2, 3] -> relu -> reshape2 back -> fc 3 ->
    softmax xent -> mean, SGD (`train`). `reuse_source`: the first fc's output is also added
    to the logits' input after the reshapes (so it is read after reshape2 copies it)."""
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        label = fluid.layers.data("label", [1], dtype="int64")
        h = fluid.layers.fc(x, 6)
        r = fluid.layers.relu(fluid.layers.reshape(h, [-1, 2, 3]))
        back = fluid.layers.reshape(r, [-1, 6])
        if reuse_source:
            back = fluid.layers.elementwise_add(back, h)
        logits = fluid.layers.fc(back, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        if train:
            fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def _lowered(main, keep):
    low = Lowering(main, 0, keep=[k if isinstance(k, str) else k.name for k in keep])
    assert len(low.segments) == 1
    return low, low.segments[0]


def _shared_vars(seg):
    """{(dst variable, src variable)} of the copies the plan left out."""
    by_name = {b.name: b.var for b in seg.bufs}
    return {(by_name[d], by_name[s]) for d, s in seg.inplace}


def _feeds():
    """Three steps of batches 1, 5 and 2."""
    rng = np.random.default_rng(3)
    return [{"x": rng.normal(size=(n, 4)).astype("float32"),
             "label": rng.integers(0, 3, (n, 1)).astype("int64")} for n in (1, 5, 2)]


def _as_with_every_copy(main, startup, fetch, monkeypatch):
    """The compiled step's values, and those of the same step compiled with no copy left
    out (each pair of arrays equal)."""
    shared = train(main, startup, fetch, _feeds(), True)
    with monkeypatch.context() as m:
        m.setattr(buffers, "_copies", lambda seg: [])
        assert _lowered(main, fetch)[1].inplace == []
        copied = train(main, startup, fetch, _feeds(), True)
    _same(shared, copied)


def _same(a, b):
    for ra, rb in zip(a[0], b[0]):
        for va, vb in zip(ra, rb):
            np.testing.assert_array_equal(va, vb)
    for name, v in a[1].items():
        np.testing.assert_array_equal(v, b[1][name], err_msg=name)


def test_copies_whose_source_dies_there_are_left_out_and_train_bit_for_bit(monkeypatch):
    main, startup, loss = _net()
    low, seg = _lowered(main, [loss])
    ops = main.global_block().ops
    add_grad = next(op for op in ops if op.type == "elementwise_add_grad"
                    and op.input("X")[0].startswith("fc_0"))
    want = {(add_grad.output("X@GRAD")[0], add_grad.input("Out@GRAD")[0])}
    want |= {(op.output("X@GRAD")[0], op.input("Out@GRAD")[0]) for op in ops
             if op.type == "reshape2_grad"}
    assert want <= _shared_vars(seg)
    # the forward reshapes' sources are read by the backward (relu_grad reads relu's Out):
    # those copies stay
    assert low.source.count("std::memcpy") == 2
    _as_with_every_copy(main, startup, [loss], monkeypatch)


def test_an_inference_programs_reshapes_are_left_out(monkeypatch):
    main, startup, loss = _net(train=False)
    low, seg = _lowered(main, [loss])
    want = {(op.output("Out")[0], op.input("X")[0]) for op in main.global_block().ops
            if op.type == "reshape2"}
    assert len(want) == 2 and want <= _shared_vars(seg)
    assert "std::memcpy" not in low.source
    _as_with_every_copy(main, startup, [loss], monkeypatch)


@pytest.mark.parametrize("case", ["read_later", "fetched"])
def test_a_source_still_read_keeps_its_copy(case, monkeypatch):
    main, startup, loss = _net(reuse_source=case == "read_later")
    ops = main.global_block().ops
    first = next(op for op in ops if op.type == "reshape2")
    src = first.input("X")[0]
    fetch = [loss] + ([src] if case == "fetched" else [])
    low, seg = _lowered(main, fetch)
    assert (first.output("Out")[0], src) not in _shared_vars(seg)
    assert "std::memcpy" in low.source
    _as_with_every_copy(main, startup, fetch, monkeypatch)

"""The wire format (Paddle tensor bytes behind a JSON header) and split_byref."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core import serialization as ser
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.distributed import wire
from fluidity.errors import FormatError


def test_lod_tensor_round_trip_is_paddle_bytes():
    t = LoDTensor(np.arange(12, dtype="float32").reshape(3, 4), [[0, 1, 3]])
    msg = wire.encode({"name": "w", "trainer_id": 1}, t)
    header, back = wire.decode(msg)
    assert header == {"name": "w", "trainer_id": 1, "kind": "lod_tensor"}
    np.testing.assert_array_equal(np.array(back), np.array(t))
    assert back.lod() == [[0, 1, 3]]
    assert msg.endswith(ser.lod_tensor_to_bytes(t))   # the payload is Paddle's record


def test_selected_rows_and_none():
    sr = SelectedRows([1, 4], 6, np.ones((2, 3), "float32"))
    _h, back = wire.decode(wire.encode({}, sr))
    assert list(back.rows) == [1, 4] and back.height == 6
    np.testing.assert_array_equal(back.value, sr.value)
    assert wire.decode(wire.encode({"x": 1}))[1] is None


def test_corrupt_messages():
    with pytest.raises(FormatError):
        wire.decode(b"\x01")
    with pytest.raises(FormatError):
        wire.decode(b"\xff\x00\x00\x00{}")
    with pytest.raises(FormatError):
        wire.decode(b"\x02\x00\x00\x00{}")


def test_split_byref_rows():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", [3, 3], append_batch_size=False, dtype="float32")
        block = main.global_block()
        outs = [block.create_var(name=f"o{i}", dtype="float32") for i in range(2)]
        block.append_op(type="split_byref", inputs={"X": [x]}, outputs={"Out": outs},
                        attrs={"sections": [1, 2]})
    xv = np.arange(9, dtype="float32").reshape(3, 3)
    a, b = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=outs)
    np.testing.assert_array_equal(a, xv[:1])
    np.testing.assert_array_equal(b, xv[1:])

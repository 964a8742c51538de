"""Paddle's LoDTensor / SelectedRows records byte for byte, their validation, atomic writes."""
import io
import os
import struct

import numpy as np
import pytest

from fluidity.core import dtypes
from fluidity.core import serialization as ser
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.errors import FluidityError

# float32 [[0, 1, 2], [3, 4, 5]], computed by hand from Paddle's SerializeToStream layout
_TENSOR_PART = bytes.fromhex(
    "00000000"                    # uint32 tensor version 0
    "06000000"                    # int32 TensorDesc length 6
    "080510021003"                # TensorDesc: data_type=5 (FP32), dims=2, dims=3
    "00000000" "0000803f" "00000040" "00004040" "00008040" "0000a040")  # 0..5 as float32
_NO_LOD = bytes.fromhex("00000000" "0000000000000000") + _TENSOR_PART   # version, lod_level 0
_WITH_LOD = bytes.fromhex(
    "00000000"                    # uint32 version 0
    "0100000000000000"            # uint64 lod_level 1
    "1800000000000000"            # level 0: 24 bytes of offsets
    "0000000000000000" "0100000000000000" "0200000000000000") + _TENSOR_PART  # [0, 1, 2]
_ARR = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_lod_tensor_record_bytes_without_lod():
    assert ser.lod_tensor_to_bytes(_ARR) == _NO_LOD
    assert ser.lod_tensor_to_bytes(LoDTensor(_ARR)) == _NO_LOD
    t = ser.lod_tensor_from_bytes(_NO_LOD)
    np.testing.assert_array_equal(t.numpy(), _ARR)
    assert t.numpy().dtype == np.float32 and t.lod() == []


def test_lod_tensor_record_bytes_with_lod():
    assert ser.lod_tensor_to_bytes(LoDTensor(_ARR, [[0, 1, 2]])) == _WITH_LOD
    assert ser.lod_tensor_to_bytes(_ARR, lod=[[0, 1, 2]]) == _WITH_LOD
    t = ser.lod_tensor_from_bytes(_WITH_LOD)
    np.testing.assert_array_equal(t.numpy(), _ARR)
    assert t.lod() == [[0, 1, 2]]


def test_selected_rows_record_bytes():
    sr = SelectedRows([0, 3], 10, np.ones((2, 2), np.float32))
    want = bytes.fromhex(
        "00000000" "0200000000000000"                   # version 0, 2 rows
        "0000000000000000" "0300000000000000"           # row ids 0, 3 (int64)
        "0a00000000000000"                              # height 10
        "00000000" "06000000" "080510021002"            # tensor version, desc f32 [2, 2]
        + "0000803f" * 4)
    assert ser.selected_rows_to_bytes(sr) == want
    back = ser.selected_rows_from_bytes(want)
    assert back.rows.tolist() == [0, 3] and back.height == 10
    np.testing.assert_array_equal(back.value, sr.value)


_ALL_DTYPES = sorted({np.dtype(d).name for d in dtypes._NP_OF_CODE.values()})


@pytest.mark.parametrize("dtype", _ALL_DTYPES)
@pytest.mark.parametrize("shape", [(3, 2), (), (0, 4), (2, 1, 3)])
def test_round_trip_every_dtype(dtype, shape):
    rng = np.random.default_rng(1)
    a = (rng.normal(size=shape) * 50).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * a
    back = ser.lod_tensor_from_bytes(ser.lod_tensor_to_bytes(a)).numpy()
    assert back.dtype == a.dtype and back.shape == a.shape
    np.testing.assert_array_equal(back, a)
    assert back.flags.writeable


def test_big_endian_and_non_contiguous_input():
    a = np.arange(12, dtype=">i4").reshape(3, 4)[:, ::2]
    b = ser.lod_tensor_to_bytes(a)
    assert b == ser.lod_tensor_to_bytes(np.ascontiguousarray(a, dtype="<i4"))
    np.testing.assert_array_equal(ser.lod_tensor_from_bytes(b).numpy(), a)


def test_multi_level_lod_round_trip():
    t = LoDTensor(np.arange(5, dtype=np.int64).reshape(5, 1), [[0, 2, 3], [0, 1, 3, 5]])
    back = ser.lod_tensor_from_bytes(ser.lod_tensor_to_bytes(t))
    assert back.lod() == [[0, 2, 3], [0, 1, 3, 5]]


def test_several_records_from_a_file_object(tmp_path):
    path = tmp_path / "combined"
    arrays = [np.arange(4, dtype=np.float32), np.ones((2, 2), np.int64), np.array(True)]
    with open(path, "wb") as f:
        for a in arrays:
            ser.write_lod_tensor(f, a)
    with open(path, "rb") as f:
        r = ser.reader(f)
        for a in arrays:
            np.testing.assert_array_equal(ser.read_lod_tensor(r).numpy(), a)
        assert r.at_end()


def test_window_read_of_a_slice():
    b = ser.lod_tensor_to_bytes(np.arange(20, dtype=np.float64).reshape(5, 4))
    r = ser.reader(io.BytesIO(b + b"next"))
    t = ser.read_lod_tensor(r, window=(4, [2, 4]))
    np.testing.assert_array_equal(t.numpy(), np.arange(4, 12).reshape(2, 4))
    assert r.left == 4  # positioned after the record
    with pytest.raises(ser.FormatError, match="cannot read shape"):
        ser.read_lod_tensor(ser.reader(io.BytesIO(b)), window=(16, [2, 4]))


# --- validation ------------------------------------------------------------------------
def test_every_truncation_is_reported():
    for data in (_NO_LOD, _WITH_LOD):
        for cut in range(len(data)):
            with pytest.raises(ser.FormatError, match="truncated"):
                ser.lod_tensor_from_bytes(data[:cut])


def test_truncated_message_says_how_much():
    with pytest.raises(ser.FormatError, match=r"expected 24 bytes of float32\[2, 3\] data at "
                                              r"offset 26, got 10"):
        ser.lod_tensor_from_bytes(_NO_LOD[:-14])


def test_truncated_non_seekable_stream():
    class Pipe(io.RawIOBase):
        def __init__(self, data):
            self.b = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, buf):
            return self.b.readinto(memoryview(buf)[:3])  # dribbles 3 bytes at a time

    np.testing.assert_array_equal(ser.read_lod_tensor(Pipe(_NO_LOD)).numpy(), _ARR)
    with pytest.raises(ser.FormatError, match="truncated"):
        ser.read_lod_tensor(Pipe(_NO_LOD[:-1]))


def test_bad_versions():
    bad = struct.pack("<I", 1) + _NO_LOD[4:]
    with pytest.raises(ser.FormatError, match="unsupported LoDTensor version 1 .*expected 0"):
        ser.lod_tensor_from_bytes(bad)
    bad = _NO_LOD[:12] + struct.pack("<I", 7) + _NO_LOD[16:]
    with pytest.raises(ser.FormatError, match="unsupported tensor version 7"):
        ser.lod_tensor_from_bytes(bad)


def test_garbage_tensor_desc():
    bad = _NO_LOD[:20] + b"\xff\xff\xff\xff\xff\xff" + _NO_LOD[26:]
    with pytest.raises(ser.FormatError, match="bad TensorDesc"):
        ser.lod_tensor_from_bytes(bad)
    bad = _NO_LOD[:16] + struct.pack("<i", -5) + _NO_LOD[20:]
    with pytest.raises(ser.FormatError, match="bad TensorDesc length -5"):
        ser.lod_tensor_from_bytes(bad)
    no_dtype = _NO_LOD[:16] + struct.pack("<i", 4) + b"\x10\x02\x10\x03" + _NO_LOD[26:]
    with pytest.raises(ser.FormatError, match="field data_type: required field missing"):
        ser.lod_tensor_from_bytes(no_dtype)


def test_unknown_and_unsupported_dtypes():
    bad = _NO_LOD[:20] + b"\x08\x63" + _NO_LOD[22:]   # data_type = 99
    with pytest.raises(ser.FormatError, match="field data_type: unknown Type value 99"):
        ser.lod_tensor_from_bytes(bad)
    bf16 = _NO_LOD[:20] + b"\x08\x16" + _NO_LOD[22:]  # BF16 (22): no numpy dtype
    with pytest.raises(ser.FormatError, match="unsupported tensor dtype BF16"):
        ser.lod_tensor_from_bytes(bf16)


def test_bad_lod_and_trailing_bytes():
    bad = _WITH_LOD[:28] + struct.pack("<Q", 5) + _WITH_LOD[36:]  # offsets [0, 5, 2]
    with pytest.raises(ser.FormatError, match="bad LoD"):
        ser.lod_tensor_from_bytes(bad)
    bad = _WITH_LOD[:12] + struct.pack("<Q", 20) + _WITH_LOD[20:]
    with pytest.raises(ser.FormatError, match="not a multiple of 8"):
        ser.lod_tensor_from_bytes(bad)
    with pytest.raises(ser.FormatError, match="3 unexpected bytes after the record"):
        ser.lod_tensor_from_bytes(_NO_LOD + b"abc")


def test_huge_dims_do_not_allocate():
    desc = bytes.fromhex("0805") + b"\x10" + b"\xff\xff\xff\xff\xff\xff\xff\x0f" * 1
    data = bytes(16) + struct.pack("<i", len(desc)) + desc
    with pytest.raises(ser.FormatError, match="truncated"):
        ser.lod_tensor_from_bytes(data)


def test_selected_rows_validation():
    good = ser.selected_rows_to_bytes(SelectedRows([1, 2], 3, np.zeros((2, 4), np.float32)))
    with pytest.raises(ser.FormatError, match="unsupported SelectedRows version"):
        ser.selected_rows_from_bytes(b"\x02" + good[1:])
    with pytest.raises(ser.FormatError, match="row ids must lie in"):
        ser.selected_rows_from_bytes(good[:28] + struct.pack("<q", 2) + good[36:])
    for cut in (3, 15, 27, 40, len(good) - 1):
        with pytest.raises(ser.FormatError, match="truncated"):
            ser.selected_rows_from_bytes(good[:cut])


def test_uninitialized_tensor_cannot_be_written():
    with pytest.raises(ser.FormatError, match="uninitialized"):
        ser.lod_tensor_to_bytes(LoDTensor())


# --- atomic files ------------------------------------------------------------------------
def test_atomic_write_replaces_and_cleans_up(tmp_path):
    path = tmp_path / "sub" / "f.bin"
    ser.atomic_write(path, lambda f: f.write(b"one"))
    ser.atomic_write(path, lambda f: f.write(b"two"))
    assert path.read_bytes() == b"two"
    assert os.listdir(path.parent) == ["f.bin"]
    assert (path.stat().st_mode & 0o777) == 0o666 & ~_umask()


def _umask():
    m = os.umask(0)
    os.umask(m)
    return m


def test_atomic_write_failure_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "f.bin"
    path.write_bytes(b"good")

    def half_then_fail(f):
        f.write(b"half")
        raise RuntimeError("interrupted")
    with pytest.raises(RuntimeError, match="interrupted"):
        ser.atomic_write(path, half_then_fail)
    assert path.read_bytes() == b"good" and os.listdir(tmp_path) == ["f.bin"]

    def fail_fsync(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(ser.os, "fsync", fail_fsync)
    with pytest.raises(FluidityError, match=r"f\.bin: cannot write: No space left"):
        ser.atomic_write(path, lambda f: f.write(b"new"))
    assert path.read_bytes() == b"good" and os.listdir(tmp_path) == ["f.bin"]


def test_read_file_names_missing_file(tmp_path):
    with pytest.raises(FluidityError, match="nope: cannot read"):
        ser.read_file(tmp_path / "nope")


# --- the file loaders (load ops, fluid.io) ---------------------------------------------
def test_load_tensor_file_names_file_and_variable(tmp_path):
    path = tmp_path / "w"
    path.write_bytes(_NO_LOD)
    np.testing.assert_array_equal(ser.load_tensor_file(path).numpy(), _ARR)
    path.write_bytes(_NO_LOD[:-3])
    with pytest.raises(ser.FormatError, match=f"^{path}: variable 'w': truncated"):
        ser.load_tensor_file(path, name="w")
    path.write_bytes(_NO_LOD + b"x")
    with pytest.raises(ser.FormatError, match=f"^{path}: 1 unexpected bytes after the record"):
        ser.load_tensor_file(path)
    with pytest.raises(FluidityError, match="nope: cannot read"):
        ser.load_tensor_file(tmp_path / "nope")


def test_load_combined_file_names_the_record(tmp_path):
    a, b = ser.lod_tensor_to_bytes(_ARR), ser.lod_tensor_to_bytes(np.arange(3, dtype=np.int64))
    path = tmp_path / "params"
    path.write_bytes(a + b)
    got = ser.load_combined_file(path, ["a", "b"])
    assert got[1].numpy().tolist() == [0, 1, 2]
    path.write_bytes(a + b[:-1])
    with pytest.raises(ser.FormatError, match=f"^{path}: variable #1 'b' of the 2 expected"):
        ser.load_combined_file(path, ["a", "b"])
    path.write_bytes(a + b + a)
    with pytest.raises(ser.FormatError, match="bytes left after the last of the 2 variables"):
        ser.load_combined_file(path, ["a", "b"])


def test_zero_d_records_load_and_cannot_have_a_lod():
    zero_d = ser.lod_tensor_to_bytes(np.float32(1.5).reshape(()))
    t = ser.lod_tensor_from_bytes(zero_d)
    assert t.numpy().shape == () and float(t.numpy()) == 1.5
    with_lod = struct.pack("<IQQQ", 0, 1, 8, 0) + zero_d[12:]
    with pytest.raises(ser.FormatError, match="a 0-D tensor cannot have a LoD"):
        ser.lod_tensor_from_bytes(with_lod)


def test_lying_headers_do_not_allocate():
    levels = struct.pack("<IQ", 0, 1 << 60) + _NO_LOD[12:]     # 2^60 LoD levels
    with pytest.raises(ser.FormatError, match="truncated data: expected .* LoD levels"):
        ser.lod_tensor_from_bytes(levels)
    desc = bytes.fromhex("0805") + b"".join(b"\x10" + b"\xff" * 7 + b"\x7f" for _ in range(3))
    huge = bytes(16) + struct.pack("<i", len(desc)) + desc      # dims [2^56-1] * 3
    with pytest.raises(ser.FormatError, match="impossible shape .* overflows an int64"):
        ser.lod_tensor_from_bytes(huge)
    neg = bytes(16) + struct.pack("<i", 13) + bytes.fromhex("0805") + b"\x10" + b"\xff" * 9 + b"\x01"
    with pytest.raises(ser.FormatError, match=r"negative dims \[-1\]"):
        ser.lod_tensor_from_bytes(neg)


def test_format_errors_are_value_errors():
    with pytest.raises(ValueError):
        ser.lod_tensor_from_bytes(b"\x01")

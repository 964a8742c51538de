"""The IR is Paddle's framework.proto on the wire: field numbers, enum values, round trips."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import ProgramError
from fluidity.proto import framework_pb2 as pb


def _program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        e = fluid.layers.embedding(ids, [10, 3])
        h = fluid.layers.fc([x], 5, act="relu")
        y = fluid.layers.mean(h)
    return main, startup


def test_serialize_parse_serialize_is_identical():
    main, startup = _program()
    for prog in (main, startup):
        s1 = prog.serialize_to_string()
        s2 = fluid.Program.parse_from_string(s1).serialize_to_string()
        assert s1 == s2
        s3 = fluid.Program.parse_from_string(s2).clone().serialize_to_string()
        assert s1 == s3


def test_wire_numbers_match_paddle():
    F = pb.OpDesc.Attr.DESCRIPTOR.fields_by_name
    assert {n: F[n].number for n in ("name", "type", "i", "f", "s", "ints", "floats", "strings",
                                     "b", "bools", "block_idx", "l", "blocks_idx", "longs",
                                     "float64s", "var_name", "vars_name", "float64", "scalar",
                                     "scalars")} == {
        "name": 1, "type": 2, "i": 3, "f": 4, "s": 5, "ints": 6, "floats": 7, "strings": 8,
        "b": 10, "bools": 11, "block_idx": 12, "l": 13, "blocks_idx": 14, "longs": 15,
        "float64s": 16, "var_name": 17, "vars_name": 18, "float64": 19, "scalar": 20,
        "scalars": 21}
    assert [pb.AttrType.Value(n) for n in ("INT", "FLOAT", "STRING", "INTS", "FLOATS", "STRINGS",
                                           "BOOLEAN", "BOOLEANS", "BLOCK", "LONG", "BLOCKS",
                                           "LONGS", "FLOAT64S", "VAR", "VARS", "FLOAT64",
                                           "SCALAR", "SCALARS")] == list(range(18))
    T = pb.VarType
    assert (T.BOOL, T.INT16, T.INT32, T.INT64, T.FP16, T.FP32, T.FP64) == tuple(range(7))
    assert (T.LOD_TENSOR, T.SELECTED_ROWS, T.FEED_MINIBATCH, T.FETCH_LIST, T.STEP_SCOPES,
            T.LOD_RANK_TABLE, T.LOD_TENSOR_ARRAY, T.PLACE_LIST, T.READER) == tuple(range(7, 16))
    assert (T.RAW, T.TUPLE, T.SIZE_T, T.UINT8, T.INT8, T.BF16, T.COMPLEX64, T.COMPLEX128) == \
        (17, 18, 19, 20, 21, 22, 23, 24)
    assert (T.STRING, T.STRINGS, T.VOCAB, T.FEED_LIST, T.PSTRING, T.SPARSE_COO,
            T.SPARSE_CSR) == tuple(range(25, 32))
    assert pb.BlockDesc.DESCRIPTOR.fields_by_name["forward_block_idx"].number == 5
    P = pb.ProgramDesc.DESCRIPTOR.fields_by_name
    assert (P["blocks"].number, P["version"].number, P["op_version_map"].number) == (1, 4, 5)
    V = pb.VarDesc.DESCRIPTOR.fields_by_name
    assert (V["persistable"].number, V["need_check_feed"].number, V["is_parameter"].number,
            V["stop_gradient"].number) == (3, 4, 5, 6)


def test_hand_encoded_paddle_bytes_parse():
    """Bytes written field by field as Paddle's C++ would: block 0 with one var and one op."""
    def varint(n):
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                return out

    def field(num, wire, payload):
        key = varint(num << 3 | wire)
        return key + (varint(len(payload)) + payload if wire == 2 else payload)
    tensor = field(1, 0, varint(5)) + field(2, 0, varint((1 << 64) - 1)) + field(2, 0, varint(3))
    lodt = field(1, 2, tensor)
    vtype = field(1, 0, varint(7)) + field(3, 2, lodt)
    var = field(1, 2, b"x") + field(2, 2, vtype)
    attr = field(1, 2, b"scale") + field(2, 0, varint(1)) + field(4, 5, np.float32(2.5).tobytes())
    op = field(3, 2, b"scale") + field(1, 2, field(1, 2, b"X") + field(2, 2, b"x")) + \
        field(2, 2, field(1, 2, b"Out") + field(2, 2, b"x")) + field(4, 2, attr)
    block = field(1, 0, varint(0)) + field(2, 0, varint((1 << 64) - 1)) + field(3, 2, var) + \
        field(4, 2, op)
    prog = fluid.Program.parse_from_string(field(1, 2, block))
    b = prog.global_block()
    assert b.var("x").shape == (-1, 3) and b.var("x").dtype == fluid.VarType.FP32
    assert b.ops[0].type == "scale" and b.ops[0].attr("scale") == 2.5
    assert b.parent_idx == -1


def test_every_attr_type_round_trips():
    prog = fluid.Program()
    block = prog.global_block()
    block.create_var(name="a", shape=[1], dtype="float32")
    op = block.append_op("scale", {"X": "a"}, {"Out": "a"}, {"scale": 2.0})
    values = {"i": 3, "f": 0.5, "s": "hi", "ints": [1, 2], "floats": [0.5, 1.5],
              "strings": ["a", "b"], "b": True, "bools": [True, False], "l": 2**40,
              "longs": [2**40, 1]}
    for k, v in values.items():
        op._set_attr(k, v)
    op2 = fluid.Program.parse_from_string(prog.serialize_to_string()).global_block().ops[0]
    for k, v in values.items():
        assert op2.attr(k) == v, k
    types = {a.name: a.type for a in op2.desc.attrs}
    assert types["l"] == pb.AttrType.LONG and types["longs"] == pb.AttrType.LONGS
    assert types["scale"] == pb.AttrType.FLOAT and types["bools"] == pb.AttrType.BOOLEANS


def test_op_version_map_recorded():
    main, _ = _program()
    desc = pb.ProgramDesc()
    desc.ParseFromString(main.serialize_to_string())
    names = {p.op_name: p.op_version.version for p in desc.op_version_map.pair}
    assert names.get("elementwise_add") == 1
    assert desc.version.version == fluid.framework.CURRENT_PROGRAM_VERSION


@pytest.mark.parametrize("data", [b"\xff\xff\xff\xff", b"garbage that is not a protobuf!!"])
def test_garbage_program_bytes(data):
    with pytest.raises(ProgramError):
        fluid.Program.parse_from_string(data)


def test_truncated_program_bytes():
    main, _ = _program()
    s = main.serialize_to_string()
    with pytest.raises(ProgramError):
        fluid.Program.parse_from_string(s[: len(s) // 2])

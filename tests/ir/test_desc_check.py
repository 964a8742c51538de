"""Corrupt ProgramDescs fail when read, with a ProgramFormatError naming the file and the
field, never later as a raw TypeError, EncodeError or recursion."""
import glob
import os

import pytest

import fluidity as fluid
from fluidity.errors import FluidityError, FormatError, ProgramError, ProgramFormatError
from fluidity.framework import Program, load_program_file
from fluidity.ir import desc_check
from fluidity.proto import framework_pb2 as pb
from tests.paths import FIXTURES
from tests.programs import doubling_while

AttrType = pb.AttrType
ZOO = sorted(glob.glob(os.path.join(FIXTURES, "paddle_zoo", "*", "model.pdmodel")))


def _program():
    """A small program with a while loop: block 0 and its sub-block 1."""
    main, _startup, _x = doubling_while()
    return main.desc


def _fails(desc, fragment, data=None):
    data = desc.SerializePartialToString() if data is None else data
    with pytest.raises(ProgramFormatError) as e:
        Program.parse_from_string(data)
    assert fragment in str(e.value), str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, ProgramError)
    return e.value


def _while_op(desc):
    return next(op for op in desc.blocks[0].ops if op.type == "while")


def _attr(op, name):
    return next(a for a in op.attrs if a.name == name)


@pytest.mark.parametrize("path", ZOO, ids=lambda p: p.split(os.sep)[-2])
def test_paddle_programs_pass(path):
    with open(path, "rb") as f:
        desc = desc_check.parse_program_desc(f.read(), path)
    assert desc.blocks


def test_not_protobuf_and_empty():
    _fails(None, "not a ProgramDesc (protobuf cannot parse", b"\xff\xff\xff")
    _fails(None, "the program has no blocks", b"")
    with pytest.raises(ProgramFormatError, match="expected the bytes .* got str"):
        Program.parse_from_string("not bytes")


def test_invalid_utf8_in_a_name_is_named():
    desc = _program()
    name = desc.blocks[0].vars[0].name.encode()
    data = desc.SerializeToString().replace(name, b"\xff" * len(name), 1)
    _fails(None, "field blocks[0].vars[0].name: invalid UTF-8", data)


def test_missing_required_field_is_named():
    desc = _program()
    desc.blocks[0].vars[1].ClearField("type")
    _fails(desc, "field blocks[0].vars[1].type: required field missing")
    desc = _program()
    _attr(_while_op(desc), "sub_block").ClearField("name")
    _fails(desc, "attrs[")


def test_unknown_enum_value_and_wrong_wire_type():
    desc = _program()
    var = next(v for v in desc.blocks[0].vars if v.type.type == pb.VarType.LOD_TENSOR)
    var.type.lod_tensor.tensor.data_type = pb.VarType.FP32
    data = desc.SerializeToString()
    # data_type FP32 (field 1, varint 5) inside a TensorDesc -> 99 (unknown), same length
    k = data.index(b"\x08\x05\x10")
    _fails(None, "tensor.data_type: unknown Type value 99", data[:k] + b"\x08\x63" + data[k + 2:])
    # BlockDesc.idx (field 1, varint) sent as a fixed32 (wire type 5)
    block0 = desc.blocks[0].SerializeToString()
    assert block0.startswith(b"\x08\x00\x10")
    bad = pb.ProgramDesc()
    bad.blocks.add().MergeFromString(b"\x0d\x00\x00\x00\x00" + block0[2:])
    _fails(bad, "field blocks[0].idx: a value of the wrong wire type (5)")


def test_block_structure():
    desc = _program()
    desc.blocks[1].idx = 5
    _fails(desc, "field blocks[1].idx: block #1 says its idx is 5")
    desc = _program()
    desc.blocks[0].parent_idx = 0
    _fails(desc, "block 0 has parent 0; it must be -1")
    for parent in (1, 2, -3):
        desc = _program()
        desc.blocks[1].parent_idx = parent
        _fails(desc, f"field blocks[1].parent_idx: parent {parent} is not another of the 2")
    desc = _program()
    desc.blocks[1].forward_block_idx = 7
    _fails(desc, "forward_block_idx: 7")
    desc = _program()  # 1 -> 2 -> 1: never reaches block 0
    b2 = desc.blocks.add()
    b2.idx, b2.parent_idx = 2, 1
    desc.blocks[1].parent_idx = 2
    _fails(desc, "the chain of parents loops")


def test_sub_block_references():
    desc = _program()
    _attr(_while_op(desc), "sub_block").block_idx = 9
    _fails(desc, "('while'): names sub-block 9, but the program has 2 blocks")
    desc = _program()
    _attr(_while_op(desc), "sub_block").block_idx = 0
    _fails(desc, "names block 0 as its sub-block, which is its own block or an ancestor")
    desc = _program()  # block 1's op runs block 2, block 2's op runs block 1
    b2 = desc.blocks.add()
    b2.idx, b2.parent_idx = 2, 0
    for src, dst in ((1, 2), (2, 1)):
        op = desc.blocks[src].ops.add()
        op.CopyFrom(_while_op(desc))
        _attr(op, "sub_block").block_idx = dst
    _fails(desc, "sub-blocks call each other in a loop: blocks 1 -> 2 -> 1")


def test_block_attributes_have_their_type():
    desc = _program()
    op = _while_op(desc)
    sub = _attr(op, "sub_block")
    op.attrs.remove(sub)
    _fails(desc, "op 'while' has no attribute 'sub_block' (its sub-block)")
    desc = _program()
    sub = _attr(_while_op(desc), "sub_block")
    sub.type, sub.i = AttrType.INT, 1
    _fails(desc, "attribute 'sub_block' of op 'while' is INT, the op needs BLOCK")


def test_variables():
    desc = _program()
    desc.blocks[0].vars[1].name = desc.blocks[0].vars[0].name
    _fails(desc, "is declared twice in block 0")
    desc = _program()
    desc.blocks[0].vars[0].name = ""
    _fails(desc, "vars[0].name: empty variable name")
    desc = _program()
    var = next(v for v in desc.blocks[0].vars if v.type.type == pb.VarType.LOD_TENSOR)
    var.type.lod_tensor.tensor.dims[:] = [1 << 40, 1 << 40]
    _fails(desc, "bytes do not fit an int64 size")
    var.type.lod_tensor.tensor.dims[:] = [-1, 3]   # unknown dims are fine
    var.type.lod_tensor.lod_level = -2
    _fails(desc, "lod_level -2 is negative")
    var.type.lod_tensor.lod_level = 0
    var.type.lod_tensor.tensor.data_type = pb.VarType.LOD_TENSOR
    _fails(desc, "data_type LOD_TENSOR is not a tensor element type")


def test_a_checked_program_runs_and_round_trips():
    desc = _program()
    p = Program.parse_from_string(desc.SerializeToString())
    assert Program.parse_from_string(p.serialize_to_string()).desc == p.desc


def test_files_are_named(tmp_path):
    desc = _program()
    desc.blocks[0].vars[1].ClearField("type")
    path = tmp_path / "__model__"
    path.write_bytes(desc.SerializePartialToString())
    with pytest.raises(ProgramFormatError, match=f"^{path}: field blocks\\[0\\].vars\\[1\\].type"):
        load_program_file(path)
    with pytest.raises(FluidityError, match="nope: cannot read"):
        load_program_file(tmp_path / "nope")
    # fluid.io's loader (which prefixes the file itself) names it too
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(FluidityError, match=f"{path}: .*required field missing"):
        fluid.io.load_inference_model(str(tmp_path), exe)
    assert issubclass(FormatError, ValueError)

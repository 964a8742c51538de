"""The load-time check (fluidity/transpiler/compat_check.py): unknown op types, attributes and
slots, and op versions newer than the registry's, all reported in one error."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity import io as fio
from fluidity.errors import ProgramError, UnknownOpError
from fluidity.ops import registry
from fluidity.proto import framework_pb2 as pb
from fluidity.transpiler.compat_check import (KERNEL_HINTS, UnsupportedProgramError,
                                              check_program, find_unsupported)
from fluidity.io.manifest import MANIFEST
from paths import FIXTURES

ZOO = os.path.join(FIXTURES, "paddle_zoo")
ZOO3 = os.path.join(FIXTURES, "paddle3_zoo")


def _op(block, type_, inputs=None, outputs=None, attrs=None):
    od = block.ops.add()
    od.type = type_
    for slot, args in sorted((inputs or {}).items()):
        v = od.inputs.add()
        v.parameter = slot
        v.arguments.extend(args)
    for slot, args in sorted((outputs or {}).items()):
        v = od.outputs.add()
        v.parameter = slot
        v.arguments.extend(args)
    for name, value in (attrs or {}).items():
        a = od.attrs.add()
        registry.write_attr(a, name, value, registry.attr_type_of(value))
    return od


def _desc(n_blocks=1):
    d = pb.ProgramDesc()
    for i in range(n_blocks):
        b = d.blocks.add()
        b.idx, b.parent_idx = i, (-1 if i == 0 else 0)
    return d


def _version(desc, op, v):
    p = desc.op_version_map.pair.add()
    p.op_name = op
    p.op_version.version = v


def _raises(desc):
    with pytest.raises(UnsupportedProgramError) as e:
        check_program(desc, "prog")
    return e.value


def test_supported_program_passes():
    d = _desc()
    _op(d.blocks[0], "scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": 2.0, "op_role": 0})
    _op(d.blocks[0], "relu", {"X": ["y"]}, {"Out": ["z"]})
    check_program(d)
    assert find_unsupported(d) == ({}, {}, {}, {})
    check_program(fluid.Program.parse_from_string(d.SerializeToString()))  # a Program too


def test_two_unknown_ops_both_named_in_one_error():
    d = _desc(2)
    _op(d.blocks[0], "frobnicate", {"X": ["x"]}, {"Out": ["y"]})
    _op(d.blocks[0], "relu", {"X": ["y"]}, {"Out": ["z"]})
    _op(d.blocks[1], "quux_pool", {"X": ["z"]}, {"Out": ["w"]})
    _op(d.blocks[1], "frobnicate", {"X": ["w"]}, {"Out": ["v"]})
    e = _raises(d)
    msg = str(e)
    assert "'frobnicate'" in msg and "'quux_pool'" in msg
    assert "2 unsupported op types" in msg
    assert "'frobnicate' (2 ops in blocks 0, 1)" in msg
    assert "'quux_pool' (1 op in block 1)" in msg
    assert e.unknown_ops == {"frobnicate": [0, 1], "quux_pool": [1]}
    assert isinstance(e, UnknownOpError) and isinstance(e, ProgramError)


def test_unknown_attributes_listed_per_op():
    d = _desc()
    _op(d.blocks[0], "scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": 2.0, "wobble": 1,
                                                             "zap": "a"})
    _op(d.blocks[0], "relu", {"X": ["y"]}, {"Out": ["z"]}, {"alpha": 0.5})
    _op(d.blocks[0], "scale", {"X": ["z"]}, {"Out": ["w"]}, {"wibble": True})
    e = _raises(d)
    assert e.unknown_attrs == {"relu": ["alpha"], "scale": ["wibble", "wobble", "zap"]}
    assert "unknown attributes: relu: alpha; scale: wibble, wobble, zap" in str(e)
    assert not e.unknown_ops


def test_everything_in_one_message():
    d = _desc()
    _op(d.blocks[0], "frobnicate", {"X": ["x"]}, {"Out": ["y"]})
    _op(d.blocks[0], "nope_op", {"X": ["x"]}, {"Out": ["y"]})
    _op(d.blocks[0], "scale", {"X": ["x"], "Bias": ["b"]}, {"Out": ["y"]}, {"wobble": 1})
    _version(d, "scale", 3)
    msg = str(_raises(d))
    for part in ("'frobnicate'", "'nope_op'", "scale: wobble", "scale: input Bias",
                 "scale is version 3 in the program, Fluidity implements 0"):
        assert part in msg, part
    assert msg.startswith("prog cannot run in Fluidity")


def test_unknown_slot_with_arguments_fails_empty_slot_passes():
    d = _desc()
    _op(d.blocks[0], "relu", {"X": ["x"], "Extra": []}, {"Out": ["y"], "Mask": []})
    check_program(d)                      # Paddle writes empty dispensable slots freely
    _op(d.blocks[0], "relu", {"X": ["x"]}, {"Out": ["y"], "Mask": ["m"]})
    assert _raises(d).unknown_slots == {"relu": ["output Mask"]}


def test_newer_op_version_fails_equal_or_older_passes():
    d = _desc()
    _op(d.blocks[0], "elementwise_add", {"X": ["x"], "Y": ["y"]}, {"Out": ["z"]})
    ours = registry.get("elementwise_add").version
    _version(d, "elementwise_add", ours)
    check_program(d)
    d.op_version_map.pair[0].op_version.version = ours + 1
    e = _raises(d)
    assert e.newer_versions == {"elementwise_add": (ours + 1, ours)}
    assert f"elementwise_add is version {ours + 1} in the program" in str(e)


def test_versions_of_unused_ops_are_not_checked():
    """Paddle writes every versioned op it has (roi_align 3, set_value 4, ...) into each
    program; only the ops the program uses matter."""
    d = _desc()
    _op(d.blocks[0], "relu", {"X": ["x"]}, {"Out": ["y"]})
    _version(d, "roi_align", 3)
    _version(d, "relu", 0)
    _version(d, "scale", 99)
    check_program(d)


def test_kernel_hints_and_paddle_extra_attrs_accepted():
    d = _desc()
    _op(d.blocks[0], "cast", {"X": ["x"]}, {"Out": ["y"]},
        {"in_dtype": 5, "out_dtype": 6, "use_mkldnn": False})
    _op(d.blocks[0], "elementwise_add", {"X": ["x"], "Y": ["y"]}, {"Out": ["z"]},
        {"Scale_x": 1.0, "Scale_y": 1.0, "Scale_out": 1.0, "mkldnn_data_type": "float32"})
    _op(d.blocks[0], "mul", {"X": ["x"], "Y": ["y"]}, {"Out": ["z"]},
        {"force_fp32_output": False, "scale_x": 1.0})
    _op(d.blocks[0], "fc", {"Input": ["x"], "W": ["y"]}, {"Out": ["z"]},  # Paddle's fc_fuse_pass
        {"in_num_col_dims": 1, "activation_type": "relu", "use_quantizer": False,
         "Scale_in": 1.0, "Scale_weights": [1.0], "Scale_out": 1.0, "force_fp32_output": False})
    assert "use_mkldnn" in KERNEL_HINTS
    check_program(d)
    _op(d.blocks[0], "relu", {"X": ["x"]}, {"Out": ["y"]}, {"Scale_x": 1.0})  # not relu's
    assert _raises(d).unknown_attrs == {"relu": ["Scale_x"]}


# op type: (the Paddle op version Fluidity's definition must implement, what it changed)
PADDLE_OP_VERSIONS = {
    "clip": (1, "inputs Min and Max (dispensable tensors overriding the attributes)"),
    "fill_constant": (2, "input ValueTensor (1); attribute place_type (2, ignored on CPU)"),
    "equal": (1, "attribute force_cpu"),
    "not_equal": (1, "attribute force_cpu"),
    "less_than": (1, "attribute force_cpu"),
    "less_equal": (1, "attribute force_cpu"),
    "greater_than": (1, "attribute force_cpu"),
    "greater_equal": (1, "attribute force_cpu"),
    "gather": (1, "input Axis"),
    "leaky_relu": (1, "out = x if x > 0 else alpha * x, also for alpha outside [0, 1]"),
    "softplus": (1, "attributes beta and threshold, out = x where beta * x > threshold"),
    "lookup_table": (1, "attribute entry_config"),
    "lookup_table_v2": (1, "int32 as well as int64 ids"),
    "momentum": (1, "MasterParam/MasterParamOut, regularization_method/_coeff, "
                    "multi_precision, rescale_grad"),
    "matmul": (1, "attribute fused_reshape_Y of oneDNN fusion passes"),
    "mish": (1, "softplus inside with `threshold`"),
}


def test_declared_paddle_versions_applied():
    for op, (v, why) in PADDLE_OP_VERSIONS.items():
        if registry.has(op):
            assert registry.get(op).version >= v, op
            assert why
    assert registry.get("fill_constant").version == 2
    assert registry.get("fill_constant").declares("place_type")


@pytest.mark.parametrize("zoo, name", [(z, n) for z in (ZOO, ZOO3) for n in sorted(os.listdir(z))])
def test_paddle_zoo_programs_pass_or_lack_only_pending_ops(zoo, name):
    """Paddle's own programs (2.6.2 and 3.3.1): nothing unknown but ops still being written
    elsewhere."""
    paths = [os.path.join(zoo, name, "model.pdmodel")]
    if os.path.isdir(os.path.join(zoo, name, "model_dir")):
        paths.append(os.path.join(zoo, name, "model_dir", "__model__"))
    for path in paths:
        prog = fio.load_program(path)
        unknown_ops, attrs, slots, newer = find_unsupported(prog)
        assert set(unknown_ops) <= {"rnn", "while", "conditional_block", "select_input"}
        assert not newer
        known = {t for t in {op.type for b in prog.blocks for op in b.ops} if registry.has(t)}
        assert not (set(attrs) & known), attrs
        assert not (set(slots) & known), slots
        assert len(prog.desc.op_version_map.pair) > 60   # Paddle writes all it has


# --- on load: io.load_inference_model and the CLI --------------------------------------------
@pytest.fixture(scope="module")
def broken_model(tmp_path_factory):
    """A saved model whose relu and softmax ops were renamed to types nobody has."""
    d = tmp_path_factory.mktemp("compat")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        h = fluid.layers.fc(x, 3, act="relu")
        y = fluid.layers.fc(h, 2, act="softmax")
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fio.save_inference_model(str(d / "good" / "m"), [x], [y], exe, main)
        fio.save_inference_model(str(d / "bad" / "m"), [x], [y], exe, main)
    path = d / "bad" / "m.pdmodel"
    desc = pb.ProgramDesc()
    desc.ParseFromString(path.read_bytes())
    for od in desc.blocks[0].ops:
        if od.type in ("relu", "softmax"):
            od.type = "fancy_" + od.type
    path.write_bytes(desc.SerializeToString())
    (d / "bad" / MANIFEST).unlink()  # hand-edited: a directory without fluidity's manifest
    np.save(d / "x.npy", np.ones((2, 4), "float32"))
    return d


def test_load_inference_model_reports_every_unknown_op(broken_model):
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        fio.load_inference_model(str(broken_model / "good" / "m"), exe)   # ours pass
        with pytest.raises(UnsupportedProgramError) as e:
            fio.load_inference_model(str(broken_model / "bad" / "m"), exe)
    msg = str(e.value)
    assert "m.pdmodel" in msg and "'fancy_relu'" in msg and "'fancy_softmax'" in msg


def test_load_inference_model_refuses_newer_op_version(tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        y = fluid.layers.elementwise_add(x, x)
    exe = fluid.Executor(fluid.CPUPlace())
    fio.save_inference_model(str(tmp_path), ["x"], [y], exe, main)
    path = tmp_path / "__model__"
    desc = pb.ProgramDesc()
    desc.ParseFromString(path.read_bytes())
    pairs = {p.op_name: p for p in desc.op_version_map.pair}
    assert pairs["elementwise_add"].op_version.version == registry.get("elementwise_add").version
    pairs["elementwise_add"].op_version.version += 1
    path.write_bytes(desc.SerializeToString())
    (tmp_path / MANIFEST).unlink()  # hand-edited: a directory without fluidity's manifest
    with pytest.raises(UnsupportedProgramError, match="elementwise_add is version"):
        fio.load_inference_model(str(tmp_path), exe)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "fluidity.cli", *map(str, args)],
                          capture_output=True, text=True)


def test_cli_run_and_show_on_unsupported_model(broken_model):
    d = broken_model
    r = _cli("run", d / "bad" / "m", "--input", f"x={d / 'x.npy'}")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "'fancy_relu'" in r.stderr and "'fancy_softmax'" in r.stderr
    r = _cli("show", d / "bad" / "m")
    assert r.returncode == 0, r.stderr
    assert "fancy_relu(" in r.stdout                     # the program is still shown
    assert "warning" in r.stderr and "'fancy_softmax'" in r.stderr
    r = _cli("show", d / "good" / "m")
    assert r.returncode == 0 and "warning" not in r.stderr

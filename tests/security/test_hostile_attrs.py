"""Attribute values are numbers the generator formats, never text it pastes: every attribute of
every op with a compiled form, given a value of the wrong type (a string payload that would
create a canary file as C++, a float where an int goes, a list where a scalar goes), is
refused when a program is loaded (a FormatError naming op, attribute, expected and found type)
and when it is built, and never reaches generated source when a desc is changed in memory;
extreme values of the right type (int32/int64 limits, inf, nan, huge lists) give the
interpreter's result or error compiled too, and never crash. scripts/fuzz.py's `codegen`
target runs the full product; here every (op, attribute) pair is checked in Python and a
seeded sample is compiled and run."""
import random

import numpy as np
import pytest
from codegen_samples import all_samples
from hostile import assert_no_payload, extreme_values, set_raw_attr, wrong_values
from op_test import COMPILED_ATOL, COMPILED_RTOL, build_op, reset_random_states

import fluidity as fluid
from fluidity.codegen.emit import lookup
from fluidity.codegen.lower import Lowering
from fluidity.errors import ProgramFormatError
from fluidity.framework import Program
from fluidity.ir.op_desc import unwrap
from fluidity.ops import registry
from fluidity.proto import framework_pb2 as pb

AttrType = pb.AttrType
SAMPLES, EXTRA, _ = all_samples()
COMPILED = sorted(t for t, d in registry.all_ops().items()
                  if lookup(t, "cpu") is not None or lookup(t, "cuda") is not None)
SKIP = (AttrType.BLOCK, AttrType.BLOCKS, AttrType.VAR, AttrType.VARS, AttrType.SCALAR,
        AttrType.SCALARS)


def _attrs(op_type):
    opdef = registry.get(op_type)
    return [(n, opdef.attr_type(n)) for n in opdef.attr_names() if opdef.attr_type(n) not in SKIP]


@pytest.fixture
def canary(tmp_path):
    path = tmp_path / "CANARY"
    yield str(path)
    assert not path.exists(), "a payload in an attribute ran as code"


def _one_op_desc(op_type, name, attr_type, value):
    desc = pb.ProgramDesc()
    b = desc.blocks.add()
    b.idx, b.parent_idx = 0, -1
    od = b.ops.add()
    od.type = op_type
    set_raw_attr(od, name, attr_type, value)
    return desc


def test_every_compiled_op_is_covered():
    assert len(COMPILED) > 150
    assert sum(len(_attrs(t)) for t in COMPILED) > 1000


@pytest.mark.parametrize("op_type", COMPILED)
def test_a_wrong_type_is_refused_at_load_naming_op_attribute_and_types(op_type, canary):
    for name, want in _attrs(op_type):
        for stored, value in wrong_values(want, canary):
            data = _one_op_desc(op_type, name, stored, value).SerializeToString()
            with pytest.raises(ProgramFormatError) as e:
                Program.parse_from_string(data)
            msg = str(e.value)
            assert f"op '{op_type}'" in msg and f"attribute '{name}'" in msg, msg
            assert AttrType.Name(want) in msg and AttrType.Name(stored) in msg, msg


@pytest.mark.parametrize("op_type", COMPILED)
def test_what_paddle_writes_loads(op_type):
    """int64 for int, double for float, an empty list of any type: Paddle's own files."""
    widen = {AttrType.INT: (AttrType.LONG, 3), AttrType.FLOAT: (AttrType.FLOAT64, 0.5),
             AttrType.INTS: (AttrType.LONGS, [1, 2]), AttrType.LONGS: (AttrType.INTS, [1]),
             AttrType.FLOATS: (AttrType.FLOAT64S, [0.5]), AttrType.BOOLEAN: (AttrType.INT, 1),
             AttrType.BOOLEANS: (AttrType.INTS, [])}
    for name, want in _attrs(op_type):
        if want in widen:
            Program.parse_from_string(_one_op_desc(op_type, name, *widen[want])
                                      .SerializeToString())


def test_a_wrong_type_is_refused_at_build():
    main = fluid.Program()
    with fluid.program_guard(main):
        w = fluid.layers.create_parameter([5, 2], "float32")
        ids = fluid.data("ids", [-1, 1], "int64")
        with pytest.raises(ProgramFormatError, match="op 'lookup_table': attribute "
                                                     "'padding_idx' must be LONG"):
            main.global_block().append_op("lookup_table", {"W": [w], "Ids": [ids]},
                                          {"Out": [main.global_block().create_var()]},
                                          {"padding_idx": "0) + system(0"})
        n = len(main.global_block().ops)
        op = main.global_block().append_op("scale", {"X": [w]},
                                           {"Out": [main.global_block().create_var()]})
        with pytest.raises(ProgramFormatError, match="attribute 'scale' must be FLOAT"):
            op._set_attr("scale", "2")
        assert len(main.global_block().ops) == n + 1 and op.attr("scale") == 1.0
        assert [a.name for a in op.desc.attrs].count("scale") == 1   # nothing half-written


def _sample_program(op_type):
    sample = SAMPLES.get(op_type) or next((s for t, s in EXTRA.values() if t == op_type), None)
    if sample is None:
        return None
    inputs, attrs, _wrt, *outputs = sample()
    try:
        main, _, feed, out_vars, _ = build_op(op_type, inputs, attrs, *outputs)
    except Exception:          # an update op the sample builds another way (test_emitters)
        return None
    fetch = [v.name for vs in out_vars.values() for v in vs]
    return main, feed, fetch


def _op_desc(main, op_type):
    return next(unwrap(op.desc) for op in main.global_block().ops if op.type == op_type)


@pytest.mark.parametrize("op_type", sorted(SAMPLES))
def test_a_wrong_type_changed_in_memory_never_reaches_the_source(op_type, canary):
    """A desc changed behind the loader's back: the emitter reads attributes through
    CheckedAttrs, so the op runs interpreted, and no payload is in the code."""
    built = _sample_program(op_type)
    if built is None:
        pytest.skip("sample built elsewhere")
    main, feed, fetch = built
    for name, want in _attrs(op_type):
        stored, value = wrong_values(want, canary)[0]
        od = _op_desc(main, op_type)
        saved = pb.OpDesc()
        saved.CopyFrom(od)
        set_raw_attr(od, name, stored, value)
        low = Lowering(main, 0, keep=fetch)
        assert_no_payload(low.source)
        od.CopyFrom(saved)


def _outcome(run):
    try:
        return "ok", run()
    except Exception as e:           # the interpreter's error, whatever it is
        return "error", type(e).__name__


def _cases():
    """A seeded sample of (op, attribute, AttrType, extreme value) over the sampled ops."""
    rng = random.Random(24)
    out = []
    for op_type in sorted(SAMPLES):
        attrs = [(n, t) for n, t in _attrs(op_type) if extreme_values(t)
                 and n not in registry.COMMON_ATTRS]
        if attrs:
            name, want = rng.choice(attrs)
            out.append((op_type, name) + rng.choice(extreme_values(want)))
    return rng.sample(out, 12)


@pytest.mark.parametrize("op_type, name, stored, value", _cases())
def test_extreme_values_compile_to_the_interpreters_result_or_error(op_type, name, stored,
                                                                   value):
    built = _sample_program(op_type)
    if built is None:
        pytest.skip("sample built elsewhere")
    main, feed, fetch = built
    set_raw_attr(_op_desc(main, op_type), name, stored, value)
    scope = fluid.Scope()
    exe = fluid.Executor()
    reset_random_states(main, scope)     # a random op draws the same numbers in both runs
    want = _outcome(lambda: exe.run(main, feed=feed, fetch_list=fetch, scope=scope))
    compiled = fluid.CompiledProgram(main).with_native_code()
    reset_random_states(main, scope)
    got = _outcome(lambda: exe.run(compiled, feed=feed, fetch_list=fetch, scope=scope))
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        for g, w in zip(got[1], want[1]):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                       rtol=COMPILED_RTOL, atol=COMPILED_ATOL, equal_nan=True)


def test_a_saved_model_with_a_payload_attribute_is_refused_by_every_loader(tmp_path, canary):
    """The route reported: a lookup's padding_idx holding code, in a saved __model__: the
    loader (fluid.io, `fluidity compile`, `fluidity run`) refuses it before anything
    compiles."""
    import subprocess
    import sys
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        ids = fluid.data("ids", [-1, 1], "int64")
        out = fluid.layers.embedding(ids, [10, 4])
    exe, scope = fluid.Executor(), fluid.Scope()
    d = tmp_path / "model"
    with fluid.scope_guard(scope):
        exe.run(start)
        fluid.io.save_inference_model(str(d), ["ids"], [out], exe, main)
    desc = pb.ProgramDesc()
    desc.ParseFromString((d / "__model__").read_bytes())
    op = next(o for o in desc.blocks[0].ops if o.type == "lookup_table")
    set_raw_attr(op, "padding_idx", AttrType.STRING, wrong_values(AttrType.LONG, canary)[0][1])
    (d / "__model__").write_bytes(desc.SerializeToString())
    (d / "__fluidity_manifest__.json").unlink()     # a crafted model comes as Paddle's would
    with pytest.raises(ProgramFormatError, match="attribute 'padding_idx' must be LONG"):
        fluid.io.load_inference_model(str(d), exe)
    for cmd in (["compile", str(d), "-o", str(tmp_path / "out")], ["compile", str(d),
                                                                  "--explain"]):
        r = subprocess.run([sys.executable, "-m", "fluidity.cli", *cmd], capture_output=True,
                           text=True)
        assert r.returncode != 0 and "'padding_idx' must be LONG" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "out" / "libfluidity_model.so").exists()

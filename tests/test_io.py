"""fluid.io: save/load of variables, parameters, persistables and inference models in Paddle's
layouts; pruning; the save/load ops; atomic writes; errors that name the file."""
import os

import numpy as np
import pytest

import fluidity as fluid
from fluidity import io as fio
from fluidity.core import serialization as ser
from fluidity.core.dtypes import VarType
from fluidity.errors import ExecutionError, FluidityError, ProgramError, ShapeError

_X = np.random.default_rng(0).normal(size=(5, 4)).astype("float32")


def _mlp(hidden=8, out=3):
    """x -> fc(relu) -> fc(softmax) = y, plus a side branch fc(x) the targets don't need."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        h = fluid.layers.fc(x, hidden, act="relu", param_attr=fluid.ParamAttr(name="w1"),
                            bias_attr=fluid.ParamAttr(name="b1"))
        y = fluid.layers.fc(h, out, act="softmax", param_attr=fluid.ParamAttr(name="a_w2"),
                            bias_attr=fluid.ParamAttr(name="z_b2"))
        side = fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name="side_w"),
                               bias_attr=fluid.ParamAttr(name="side_b"))
    return main, startup, x, h, y, side


@pytest.fixture
def exe():
    with fluid.scope_guard(fluid.Scope()):
        yield fluid.Executor(fluid.CPUPlace())


def _val(name, scope=None):
    return np.array((scope or fluid.global_scope()).find_var(name).get_tensor())


def _fresh(fn):
    """Run fn() in a new global scope; return its result."""
    with fluid.scope_guard(fluid.Scope()):
        return fn()


_PARAMS = ["a_w2", "b1", "side_b", "side_w", "w1", "z_b2"]


def _listing(d):
    """The files of a save: Paddle's, without fluidity's manifest (which must be there)."""
    names = os.listdir(d)
    assert fio.manifest.MANIFEST in names
    return sorted(n for n in names if n != fio.manifest.MANIFEST)


# --- variables ---------------------------------------------------------------------------
def test_save_load_params_separate_files(exe, tmp_path):
    main, startup, *_ = _mlp()
    exe.run(startup)
    fio.save_params(exe, tmp_path, main)
    assert _listing(tmp_path) == _PARAMS
    for name in _PARAMS:  # each file is exactly one LoDTensor record of the value
        assert (tmp_path / name).read_bytes() == ser.lod_tensor_to_bytes(_val(name))
    want = {n: _val(n) for n in _PARAMS}

    def load():
        fio.load_params(exe, tmp_path, main)
        return {n: _val(n) for n in _PARAMS}
    got = _fresh(load)
    for n in _PARAMS:
        np.testing.assert_array_equal(got[n], want[n])


def test_combined_file_is_records_sorted_by_name(exe, tmp_path):
    main, startup, *_ = _mlp()
    exe.run(startup)
    fio.save_params(exe, tmp_path, main, filename="params")
    assert _listing(tmp_path) == ["params"]
    assert (tmp_path / "params").read_bytes() == b"".join(
        ser.lod_tensor_to_bytes(_val(n)) for n in sorted(_PARAMS))
    want = {n: _val(n) for n in _PARAMS}

    def load():
        fio.load_params(exe, tmp_path, main, filename="params")
        return {n: _val(n) for n in _PARAMS}
    got = _fresh(load)
    for n in _PARAMS:
        np.testing.assert_array_equal(got[n], want[n])


def test_persistables_follow_paddles_rules(exe, tmp_path):
    main, startup, *_ = _mlp()
    b = main.global_block()
    b.create_var(name="step", shape=[1], dtype="int64", persistable=True)
    b.create_var(name="feed", type=VarType.FEED_MINIBATCH, persistable=True)
    b.create_var(name="fetch", type=VarType.FETCH_LIST, persistable=True)
    b.create_var(name="raw", type=VarType.RAW, persistable=True)
    exe.run(startup)
    fluid.global_scope().var("step").get_tensor().set(np.array([7], np.int64))
    fio.save_persistables(exe, tmp_path / "p", main)
    assert _listing(tmp_path / "p") == sorted(_PARAMS + ["step"])
    fio.save_params(exe, tmp_path / "q", main)
    assert "step" not in os.listdir(tmp_path / "q")
    got = _fresh(lambda: (fio.load_persistables(exe, tmp_path / "p", main), _val("step"))[1])
    assert got.tolist() == [7]


def test_save_vars_by_list_and_predicate(exe, tmp_path):
    main, startup, *_ = _mlp()
    exe.run(startup)
    b = main.global_block()
    fio.save_vars(exe, tmp_path / "a", vars=[b.var("w1"), b.var("b1")])
    assert _listing(tmp_path / "a") == ["b1", "w1"]
    fio.save_vars(exe, tmp_path / "b", main, predicate=lambda v: v.name.startswith("side"))
    assert _listing(tmp_path / "b") == ["side_b", "side_w"]


def test_selected_rows_variable_round_trip(exe, tmp_path):
    prog = fluid.Program()
    v = prog.global_block().create_var(name="table", type=VarType.SELECTED_ROWS,
                                       shape=[10, 3], dtype="float32", persistable=True)
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    fluid.global_scope().var("table").value = fluid.SelectedRows([1, 7], 10, value)
    fio.save_vars(exe, tmp_path, vars=[v])
    got = _fresh(lambda: (fio.load_vars(exe, tmp_path, vars=[v]),
                          fluid.global_scope().find_var("table").value)[1])
    assert isinstance(got, fluid.SelectedRows) and got.rows.tolist() == [1, 7]
    np.testing.assert_array_equal(got.value, value)
    with pytest.raises(FluidityError, match="not LoDTensors.*filename=None"):
        fio.save_vars(exe, tmp_path, vars=[v], filename="all")


def test_saving_an_uninitialized_variable_says_so(exe, tmp_path):
    main, startup, *_ = _mlp()
    with pytest.raises(FluidityError, match="cannot save variable 'w1' to .*w1: it holds no value"):
        fio.save_params(exe, tmp_path, main)


# --- inference models --------------------------------------------------------------------
def _run_loaded(exe, path, feed_value, **kw):
    def go():
        prog, feeds, fetches = fio.load_inference_model(path, exe, **kw)
        out = exe.run(prog, feed={feeds[0]: feed_value}, fetch_list=fetches)
        return prog, feeds, [f.name for f in fetches], out
    return _fresh(go)


def test_inference_model_round_trip_mlp_all_layouts(exe, tmp_path):
    main, startup, x, h, y, side = _mlp()
    exe.run(startup)
    want, = exe.run(main, feed={"x": _X}, fetch_list=[y])
    assert fio.save_inference_model(tmp_path / "sep", ["x"], [y], exe, main) == \
        ["save_infer_model/scale_0"]
    fio.save_inference_model(tmp_path / "comb", ["x"], [y], exe, main, params_filename="params")
    fio.save_inference_model(str(tmp_path / "v2" / "model"), [x], [y], exe, main)
    fio.save_inference_model_v2(tmp_path / "v2b" / "m", [x], [y], exe, program=main)
    assert _listing(tmp_path / "sep") == ["__model__", "a_w2", "b1", "w1", "z_b2"]
    assert _listing(tmp_path / "comb") == ["__model__", "params"]
    assert _listing(tmp_path / "v2") == ["model.pdiparams", "model.pdmodel"]
    assert (tmp_path / "v2" / "model.pdiparams").read_bytes() == \
        (tmp_path / "comb" / "params").read_bytes()
    for path, kw in [(tmp_path / "sep", {}), (tmp_path / "comb", {"params_filename": "params"}),
                     (tmp_path / "v2" / "model", {}), (tmp_path / "v2b" / "m", {})]:
        prog, feeds, fetches, (got,) = _run_loaded(exe, path, _X, **kw)
        assert feeds == ["x"] and fetches == ["save_infer_model/scale_0"]
        np.testing.assert_array_equal(got, want)
    # the user's program is untouched
    assert not main.global_block().has_var("save_infer_model/scale_0")


def test_inference_model_round_trip_embedding(exe, tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        emb = fluid.layers.embedding(ids, [20, 5], param_attr=fluid.ParamAttr(name="emb"))
        out = fluid.layers.fc(emb, 3, act="softmax")
    exe.run(startup)
    feed = fluid.create_lod_tensor(np.array([[1], [4], [19], [0], [4]], np.int64), [[2, 3]])
    want, = exe.run(main, feed={"ids": feed}, fetch_list=[out])
    fio.save_inference_model(tmp_path, ["ids"], [out], exe, main, params_filename="__params__")
    prog, feeds, fetches, (got,) = _run_loaded(exe, tmp_path, feed,
                                               params_filename="__params__")
    assert feeds == ["ids"]
    np.testing.assert_array_equal(got, want)
    assert prog.global_block().var("ids").lod_level == 1


def test_pruning_keeps_only_what_targets_need(exe, tmp_path):
    main, startup, x, h, y, side = _mlp()
    exe.run(startup)
    n_ops = len(main.global_block().ops)
    p = main._prune([y])
    assert len(main.global_block().ops) == n_ops  # input untouched
    types = [op.type for op in p.global_block().ops]
    assert types == ["mul", "elementwise_add", "relu", "mul", "elementwise_add", "softmax"]
    assert "side_w" not in p.global_block().vars and "w1" in p.global_block().vars
    assert list(p.global_block().vars) == sorted(p.global_block().vars)  # Paddle's order
    # feeding the hidden layer cuts off everything that produced it
    p = main._prune_with_input([h], [y])
    assert [op.type for op in p.global_block().ops] == ["mul", "elementwise_add", "softmax"]
    want, hv = exe.run(main, feed={"x": _X}, fetch_list=[y, h])
    fio.save_inference_model(tmp_path, [h.name], [y], exe, main)
    assert _listing(tmp_path) == ["__model__", "a_w2", "z_b2"]
    _, feeds, _, (got,) = _run_loaded(exe, tmp_path, hv)
    assert feeds == [h.name]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_saved_model_layout_feed_fetch_scale(exe, tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        a = fluid.layers.data("a", [2])
        b = fluid.layers.data("b", [2])
        s = fluid.layers.elementwise_add(a, b)
        r = fluid.layers.relu(s)
    fio.save_inference_model(tmp_path, ["a", "b"], [r, s], exe, main)
    prog = fio.load_program(tmp_path / "__model__")
    ops = prog.global_block().ops
    assert [(op.type, op.attr("col")) for op in ops[:2]] == [("feed", 1), ("feed", 0)]
    assert [op.output("Out")[0] for op in ops[:2]] == ["b", "a"]
    assert [(op.type, op.input("X")[0], op.attr("col")) for op in ops[-2:]] == [
        ("fetch", "save_infer_model/scale_0", 0), ("fetch", "save_infer_model/scale_1", 1)]
    scales = [op for op in ops if op.type == "scale"]
    assert [op.attr("scale") for op in scales] == [1.0, 1.0]
    assert not any(op.has_attr("op_callstack") for op in ops)
    assert fio.get_feed_target_names(prog) == ["a", "b"]
    assert prog.global_block().var("feed").type == VarType.FEED_MINIBATCH
    assert prog.global_block().var("fetch").persistable


@pytest.mark.skipif(not hasattr(fluid.layers, "dropout"), reason="no dropout layer yet")
def test_inference_model_sets_is_test(exe, tmp_path):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        d = fluid.layers.dropout(x, 0.5)
        y = fluid.layers.fc(d, 2)
    exe.run(startup)
    fio.save_inference_model(tmp_path, ["x"], [y], exe, main)
    prog = fio.load_program(tmp_path / "__model__")
    drop = [op for op in prog.global_block().ops if op.type == "dropout"]
    assert drop and drop[0].attr("is_test") is True


def test_feeds_must_fit_the_targets(exe, tmp_path):
    main, startup, x, h, y, side = _mlp()
    with fluid.program_guard(main):
        z = fluid.layers.data("z", [4])
    with pytest.raises(ProgramError, match="feed variable #1 'z' is not needed"):
        fio.save_inference_model(tmp_path, ["x", "z"], [y], exe, main)
    with pytest.raises(ProgramError, match="the targets need variable 'x'.*neither fed"):
        fio.save_inference_model(tmp_path, [], [y], exe, main)
    with pytest.raises(FluidityError, match="feeded_var_names must be variable names"):
        fio.save_inference_model(tmp_path, [1], [y], exe, main)


def test_program_only_and_not_for_deployment(exe, tmp_path):
    main, startup, x, h, y, side = _mlp()
    exe.run(startup)
    fio.save_inference_model(tmp_path / "a", ["x"], [y], exe, main, program_only=True)
    assert _listing(tmp_path / "a") == ["__model__"]
    fio.save_inference_model(tmp_path / "b", ["x"], [y], exe, main, export_for_deployment=False)
    assert "__model__.main_program" in os.listdir(tmp_path / "b")
    assert "side_w" in os.listdir(tmp_path / "b")  # whole program: nothing pruned


# --- atomicity ---------------------------------------------------------------------------
def test_interrupted_save_leaves_old_files_intact(exe, tmp_path, monkeypatch):
    main, startup, x, h, y, side = _mlp()
    exe.run(startup)
    fio.save_inference_model(tmp_path, ["x"], [y], exe, main, params_filename="params")
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    fluid.global_scope().find_var("w1").get_tensor().set(np.zeros((4, 8), np.float32))

    def broken_fsync(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(ser.os, "fsync", broken_fsync)
    with pytest.raises(FluidityError, match=r"__model__: cannot write: Input/output error"):
        fio.save_inference_model(tmp_path, ["x"], [y], exe, main, params_filename="params")
    with pytest.raises(FluidityError, match=r"params: cannot write"):
        fio.save_params(exe, tmp_path, main, filename="params")
    assert {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)} == before


def test_failure_while_writing_combined_file_keeps_old_one(exe, tmp_path, monkeypatch):
    main, startup, *_ = _mlp()
    exe.run(startup)
    fio.save_params(exe, tmp_path, main, filename="params")
    before = (tmp_path / "params").read_bytes()
    calls = []
    real = ser.write_lod_tensor

    def dies_on_third(f, t, lod=None):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real(f, t, lod)
    monkeypatch.setattr(ser, "write_lod_tensor", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        fio.save_params(exe, tmp_path, main, filename="params")
    assert (tmp_path / "params").read_bytes() == before
    assert _listing(tmp_path) == ["params"]


# --- bad files ---------------------------------------------------------------------------
@pytest.fixture
def saved(exe, tmp_path):
    main, startup, x, h, y, side = _mlp()
    exe.run(startup)
    fio.save_inference_model(tmp_path / "sep", ["x"], [y], exe, main)
    fio.save_inference_model(tmp_path / "comb", ["x"], [y], exe, main, params_filename="params")
    for d in ("sep", "comb"):  # Paddle's directories: no manifest, the loaders' own checks
        (tmp_path / d / fio.manifest.MANIFEST).unlink()
    return tmp_path


def _load_fails(exe, path, err, match, **kw):
    def go():
        with pytest.raises(err, match=match):
            fio.load_inference_model(path, exe, **kw)
    _fresh(go)


def test_truncated_parameter_files(exe, saved):
    f = saved / "sep" / "a_w2"
    f.write_bytes(f.read_bytes()[:-5])
    _load_fails(exe, saved / "sep", FluidityError, r"sep/a_w2: variable 'a_w2': truncated data: "
                r"expected 96 bytes of float32\[8, 3\] data at offset 26, got 91")
    f = saved / "comb" / "params"
    f.write_bytes(f.read_bytes()[:-1])
    _load_fails(exe, saved / "comb", FluidityError,
                r"comb/params: variable #3 'z_b2' of the 4 expected.*truncated",
                params_filename="params")


def test_corrupted_parameter_files(exe, saved):
    f = saved / "sep" / "b1"
    good = f.read_bytes()
    f.write_bytes(b"\x01" + good[1:])
    _load_fails(exe, saved / "sep", FluidityError, r"sep/b1: .*unsupported LoDTensor version 1")
    f.write_bytes(good[:20] + b"\xff" * 4 + good[24:])
    _load_fails(exe, saved / "sep", FluidityError, r"sep/b1: .*bad TensorDesc")
    f.write_bytes(good + b"junk")
    _load_fails(exe, saved / "sep", FluidityError, r"sep/b1: .*4 unexpected bytes")
    f.unlink()
    _load_fails(exe, saved / "sep", FluidityError, r"sep/b1: cannot read: No such file")
    p = saved / "comb" / "params"
    p.write_bytes(p.read_bytes() + ser.lod_tensor_to_bytes(np.zeros(2, np.float32)))
    _load_fails(exe, saved / "comb", FluidityError, r"params: \d+ bytes left after the last of "
                r"the 4 variables", params_filename="params")
    _load_fails(exe, saved / "comb", FluidityError, r"comb/nope: no such parameter file",
                params_filename="nope")


def test_parameters_that_do_not_fit_the_program(exe, saved, tmp_path):
    main, startup, x, h, y, side = _mlp(out=4)   # a_w2 is [8, 4] here, [8, 3] in the files
    with pytest.raises(ShapeError, match=r"sep/a_w2: variable 'a_w2' is float32\[8, 4\] in the "
                                         r"program, but the file holds float32\[8, 3\]"):
        fio.load_params(exe, saved / "sep", main)
    with pytest.raises(ShapeError, match=r"comb/params: variable 'a_w2' is float32\[8, 4\]"):
        fio.load_vars(exe, saved / "comb", main, filename="params",
                      vars=[main.global_block().var(n) for n in ["a_w2", "b1", "w1", "z_b2"]])
    (saved / "sep" / "b1").write_bytes(ser.lod_tensor_to_bytes(np.zeros(8, np.float64)))
    with pytest.raises(ShapeError, match=r"sep/b1: variable 'b1' is float32\[8\] in the program, "
                                         r"but the file holds float64\[8\]"):
        fio.load_vars(exe, saved / "sep", main, vars=[main.global_block().var("b1")])


def test_garbage_program_files(exe, saved):
    m = saved / "sep" / "__model__"
    good = m.read_bytes()
    m.write_bytes(b"\x00\x01not a program\xff\xff")
    _load_fails(exe, saved / "sep", ProgramError, r"sep/__model__: not a ProgramDesc")
    m.write_bytes(good[:-7])
    _load_fails(exe, saved / "sep", ProgramError, r"sep/__model__")
    m.write_bytes(b"")
    _load_fails(exe, saved / "sep", ProgramError, r"sep/__model__: empty file")
    m.unlink()
    _load_fails(exe, saved / "sep", FluidityError, r"sep/__model__: cannot read")
    _load_fails(exe, saved / "nothing", FluidityError, r"nothing: no inference model here")


# --- the ops themselves ---------------------------------------------------------------------
def _prog_with(op, var_kw, attrs, slot):
    prog = fluid.Program()
    b = prog.global_block()
    v = b.create_var(persistable=True, **var_kw)
    b.append_op(op, **{slot: {"X" if slot == "inputs" else "Out": v}}, attrs=attrs,
                infer_shape=False)
    return prog


def test_load_op_seek_and_shape(exe, tmp_path):
    path = str(tmp_path / "t")
    (tmp_path / "t").write_bytes(ser.lod_tensor_to_bytes(np.arange(20, dtype=np.float32)
                                                         .reshape(5, 4)))
    exe.run(_prog_with("load", dict(name="part", shape=[2, 4], dtype="float32"),
                       {"file_path": path, "seek": 8, "shape": [2, 4]}, "outputs"))
    np.testing.assert_array_equal(_val("part"), np.arange(8, 16).reshape(2, 4))


def test_fp16_save_and_load(exe, tmp_path):
    path = str(tmp_path / "h")
    fluid.global_scope().var("w").get_tensor().set(np.array([1.5, 2.25], np.float32))
    exe.run(_prog_with("save", dict(name="w", shape=[2], dtype="float32"),
                       {"file_path": path, "save_as_fp16": True}, "inputs"))
    assert ser.lod_tensor_from_bytes((tmp_path / "h").read_bytes()).numpy().dtype == np.float16
    fluid.global_scope().var("v").get_tensor().set(np.array([1.5, 2.25], np.float32))
    exe.run(_prog_with("save", dict(name="v", shape=[2], dtype="float32"),
                       {"file_path": path + "32"}, "inputs"))
    exe.run(_prog_with("load", dict(name="v16", shape=[2], dtype="float32"),
                       {"file_path": path + "32", "load_as_fp16": True}, "outputs"))
    assert _val("v16").dtype == np.float16 and _val("v16").tolist() == [1.5, 2.25]


def test_overwrite_false_refuses(exe, tmp_path):
    (tmp_path / "w").write_bytes(b"keep")
    fluid.global_scope().var("w").get_tensor().set(np.ones(2, np.float32))
    with pytest.raises(ExecutionError, match=r"w: file exists and overwrite is false"):
        exe.run(_prog_with("save", dict(name="w", shape=[2], dtype="float32"),
                           {"file_path": str(tmp_path / "w"), "overwrite": False}, "inputs"))
    assert (tmp_path / "w").read_bytes() == b"keep"


def test_save_combine_to_memory(exe):
    prog = fluid.Program()
    b = prog.global_block()
    names = ["a", "b"]
    vs = [b.create_var(name=n, shape=[2], dtype="float32", persistable=True) for n in names]
    y = b.create_var(name="blob", type=VarType.RAW, persistable=True)
    for i, n in enumerate(names):
        fluid.global_scope().var(n).get_tensor().set(np.full(2, i, np.float32))
    b.append_op("save_combine", {"X": vs}, {"Y": y}, {"save_to_memory": True},
                infer_shape=False)
    exe.run(prog)
    assert fluid.global_scope().find_var("blob").value == b"".join(
        ser.lod_tensor_to_bytes(np.full(2, i, np.float32)) for i in range(2))


# --- PaddlePaddle itself (documentation: runs only where paddle is importable) ---------------
def test_paddle_loads_our_model(exe, tmp_path):
    paddle = pytest.importorskip("paddle")
    main, startup, x, h, y, side = _mlp()
    exe.run(startup)
    want, = exe.run(main, feed={"x": _X}, fetch_list=[y])
    fio.save_inference_model(str(tmp_path / "model"), [x], [y], exe, main)
    paddle.enable_static()
    pexe = paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(paddle.static.Scope()):
        prog, feeds, fetches = paddle.static.load_inference_model(str(tmp_path / "model"), pexe)
        got, = pexe.run(prog, feed={feeds[0]: _X}, fetch_list=fetches)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_tensor_array_nothing_writes_is_an_unfed_input(exe, tmp_path):
    # DynamicRNN's output array (read by its while op, written by it too) is no feed; an
    # array that no op of the program writes still is one
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        arr = fluid.layers.create_array("float32")
        i = fluid.layers.fill_constant([1], "int64", 0)
        y = fluid.layers.scale(fluid.layers.array_read(arr, i), 2.0)
    with pytest.raises(ProgramError, match=f"the targets need variable '{arr.name}'"):
        fio.save_inference_model(tmp_path, [], [y], exe, main)


def _int_table_program(dtype):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        main.global_block().create_var(name="tree", shape=[3, 2], dtype=dtype,
                                       persistable=True)
    return main


def test_integer_ids_saved_as_one_width_load_as_the_declared_one(tmp_path):
    # PaddleRec's TDM: the train network saves its tree as int32, the infer network declares
    # it int64; Fluid 1.8 loads it. The value takes the declared dtype when the ids fit it.
    exe = fluid.Executor(fluid.CPUPlace())
    ids = np.array([[0, 5], [7, 1], [2, 3]], np.int32)
    (tmp_path / "tree").write_bytes(ser.lod_tensor_to_bytes(ids))
    main = _int_table_program("int64")
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fio.load_vars(exe, str(tmp_path), main, vars=[main.global_block().var("tree")])
    got = np.asarray(scope.find_var("tree").get_tensor())
    assert got.dtype == np.int64 and got.tolist() == ids.tolist()
    # narrowing too, when every id fits; a value that does not fit is still refused
    (tmp_path / "tree").write_bytes(ser.lod_tensor_to_bytes(ids.astype(np.int64) + 2 ** 40))
    main = _int_table_program("int32")
    with pytest.raises(ShapeError, match=r"tree: variable 'tree' is int32\[3, 2\] in the "
                                         r"program, but the file holds int64\[3, 2\]"):
        fio.load_vars(exe, str(tmp_path), main, vars=[main.global_block().var("tree")])

"""Fluid 1.x's non-layer API as a Fluid program uses it: fluid.core, fluid.data and what is
fed to data variables, places and modes, fluid.compiler and ParallelExecutor, the Program /
Block / Operator / Variable API and program.desc, unique_name, the transpiler names, the
error types, install_check."""
import os

import numpy as np
import pytest

import fluidity as fluid
from fluidity import core, layers


def _regression(data_fn=None, seed=7):
    """A linear regression program (Fluid's fit-a-line) and its startup program."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        if data_fn is None:
            x = layers.data(name="x", shape=[3], dtype="float32")
            y = layers.data(name="y", shape=[1], dtype="float32")
        else:
            x, y = data_fn()
        pred = layers.fc(input=x, size=1)
        loss = layers.mean(layers.square_error_cost(input=pred, label=y))
        fluid.optimizer.SGD(learning_rate=0.05).minimize(loss)
    return main, startup, loss


def _batch(n=8, seed=0):
    rng = np.random.RandomState(seed)
    xs = rng.rand(n, 3).astype("float32")
    return xs, (xs @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.3).astype("float32")


def _train(program, startup, loss, feeds, exe=None):
    exe = exe or fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        return [float(np.mean(exe.run(program, feed=f, fetch_list=[loss])[0])) for f in feeds]


# --- fluid.core -------------------------------------------------------------------------
def test_core_answers_a_program_choosing_its_place():
    # the truth about this machine (tests/core/test_cuda_place.py checks how it is found)
    assert fluid.core.is_compiled_with_cuda() is fluid.is_compiled_with_cuda()
    use_cuda = fluid.core.is_compiled_with_cuda() and core.get_cuda_device_count() > 0
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    main, startup, loss = _regression()
    xs, ys = _batch()
    losses = _train(main, startup, loss, [{"x": xs, "y": ys}] * 5,
                    exe=fluid.Executor(place))
    assert losses[-1] < losses[0]
    assert fluid.CUDAPlace(1).get_device_id() == 1 and fluid.CUDAPlace(1).is_gpu_place()
    assert fluid.CUDAPinnedPlace().is_cuda_pinned_place() and fluid.CPUPlace().is_cpu_place()
    assert fluid.CPUPlace() == core.CPUPlace() and fluid.CUDAPlace(0) != fluid.CUDAPlace(1)


def test_vardesc_vartype_in_a_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = layers.data("x", [2])
        y = layers.cast(x, dtype=core.VarDesc.VarType.INT64)
    assert y.dtype == core.VarDesc.VarType.INT64 == fluid.core.VarDesc.VarType.INT64
    assert x.type == core.VarDesc.VarType.LOD_TENSOR
    (out,) = fluid.Executor().run(main, feed={"x": np.array([[1.7, 2.2]], "float32")},
                                  fetch_list=[y])
    assert out.dtype == np.int64 and out.tolist() == [[1, 2]]
    assert issubclass(core.EOFException, Exception)


def test_lodtensor_methods_fluid_tests_use():
    t = core.LoDTensor()
    t.set(np.arange(6, dtype="float32").reshape(6, 1), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([[2, 4]])
    assert t.recursive_sequence_lengths() == [[2, 4]] and t.lod() == [[0, 2, 6]]
    assert t.has_valid_recursive_sequence_lengths()
    assert t.shape() == [6, 1] and t._dtype() == core.VarDesc.VarType.FP32
    assert t._get_float_element(3) == 3.0
    t._set_float_element(3, 9.5)
    assert np.array(t)[3, 0] == 9.5
    with pytest.raises(IndexError):
        t._get_float_element(6)
    t.set_lod([[0, 1, 6]])
    assert t.recursive_sequence_lengths() == [[1, 5]]
    t.set_recursive_sequence_lengths([[2, 2]])    # does not cover the 6 rows
    assert not t.has_valid_recursive_sequence_lengths()
    r = fluid.create_random_int_lodtensor([[2, 3]], [4], fluid.CPUPlace(), low=1, high=3)
    a = np.array(r)
    assert a.shape == (5, 4) and a.dtype == np.int64 and a.min() >= 1 and a.max() <= 3
    assert r.recursive_sequence_lengths() == [[2, 3]]
    scope = fluid.Scope()
    scope.var("w").get_tensor().set(np.ones(2, "float32"), fluid.CPUPlace())
    kid = scope.new_scope()
    assert kid.find_var("w") is scope.find_var("w") and kid.find_local_var("w") is None
    scope.drop_kids()
    assert scope.kids() == []


# --- fluid.data and feeding -------------------------------------------------------------
def test_fluid_data_takes_the_full_shape_and_checks_the_feed():
    def data():
        return (fluid.data(name="x", shape=[None, 3], dtype="float32"),
                fluid.data(name="y", shape=[-1, 1], dtype="float32"))
    main, startup, loss = _regression(data)
    x = main.global_block().var("x")
    assert list(x.shape) == [-1, 3] and x.lod_level == 0
    xs, ys = _batch()
    losses = _train(main, startup, loss, [{"x": xs, "y": ys}] * 4)
    assert losses[-1] < losses[0]
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        with pytest.raises(ValueError, match=r"^The fed Variable 'x' should have dimensions = 2, "
                                             r"shape = \(-1, 3\), but received fed shape "
                                             r"\[8, 4\] on each device$"):
            exe.run(main, feed={"x": np.ones((8, 4), "float32"), "y": ys}, fetch_list=[loss])
        with pytest.raises(ValueError, match=r"^The data type of fed Variable 'x' must be "
                                             r"'float32', but received 'float64'$"):
            exe.run(main, feed={"x": xs.astype("float64"), "y": ys}, fetch_list=[loss])
        # a sequence batch's first dim is not checked
        ones = fluid.create_lod_tensor(np.ones((5, 3), "float32"), [[2, 3]], fluid.CPUPlace())
        exe.run(main, feed={"x": ones, "y": np.ones((5, 1), "float32")}, fetch_list=[loss])
    with pytest.raises(TypeError):
        fluid.data(name="z", shape=3)
    with pytest.raises(ValueError):
        fluid.data(name="z", shape=[None, -5])
    seq = fluid.data(name="seq", shape=[None, 1], dtype="int64", lod_level=1)
    assert seq.lod_level == 1 and seq.dtype == core.VarDesc.VarType.INT64


def test_a_layers_data_feed_reaches_the_ops_as_given():
    """Fluid 1.x feeds what is given to a layers.data variable without a check (its
    need_check_feed is off), and its ops compute on it as it is: a [6] label fed to shape
    [1] stays [6], and square_error_cost of a [6, 1] prediction and it broadcasts to [6, 6]
    (Fluid's elementwise rule)."""
    main, startup, loss = _regression()
    y = main.global_block().var("y")
    assert list(y.shape) == [-1, 1] and not y.desc.need_check_feed
    xs, ys = _batch(6)
    pred = [op for op in main.global_block().ops if op.type == "elementwise_add"][0]
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor()
        exe.run(startup)
        fed, p, got = exe.run(main, feed={"x": xs, "y": ys.reshape(6)},
                              fetch_list=[y, pred.output("Out")[0], loss])
    assert fed.shape == (6,) and p.shape == (6, 1)
    np.testing.assert_allclose(got, [np.mean((p - ys.reshape(6)) ** 2)], rtol=1e-5)


def test_layers_data_takes_fluids_argument_order():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = layers.data("a", [2, 3], False, "int64", 1)
        b = layers.data("b", [4])
    assert list(a.shape) == [2, 3] and a.dtype == core.VarDesc.VarType.INT64
    assert a.lod_level == 1 and list(b.shape) == [-1, 4]


# --- places and modes -------------------------------------------------------------------
def test_places_modes_and_versions(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "3")
    assert fluid.cpu_places() == [fluid.CPUPlace()] * 3
    assert len(fluid.cpu_places(2)) == 2
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        fluid.cuda_places()
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        fluid.cuda_pinned_places()
    assert fluid.in_dygraph_mode() is False
    fluid.require_version("1.4.0")
    fluid.require_version(min_version="1.6", max_version="1.8.5")
    with pytest.raises(Exception, match="VersionError: PaddlePaddle version 2.0.0 or higher"):
        fluid.require_version("2.0.0")
    with pytest.raises(TypeError):           # Fluid's type for a non-string version
        fluid.require_version(1.6)
    with pytest.raises(NotImplementedError, match="load_op_library is not built"):
        fluid.load_op_library("libcustom_op.so")


# --- fluid.compiler and ParallelExecutor -------------------------------------------------
def test_with_data_parallel_trains_as_the_executor_does():
    # (tests/executor/test_data_parallel.py checks the numbers against one place closely)
    main, startup, loss = _regression()
    xs, ys = _batch(16)
    feeds = [{"x": xs, "y": ys}] * 5
    plain = _train(main, startup, loss, feeds)
    build = fluid.BuildStrategy()
    build.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    build.gradient_scale_strategy = fluid.BuildStrategy.GradientScaleStrategy.CoeffNumDevice
    build.enable_inplace = True
    exec_strategy = fluid.ExecutionStrategy()
    exec_strategy.num_threads = 2
    exec_strategy.num_iteration_per_drop_scope = 10

    def compiled():
        return fluid.compiler.CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, build_strategy=build, exec_strategy=exec_strategy,
            places=fluid.cpu_places(2))
    # float32 sums of 8 + 8 examples instead of 16: a few ulps of the losses (~0.5)
    np.testing.assert_allclose(_train(compiled(), startup, loss, feeds), plain, rtol=1e-5)
    # Fluid's per-device feed list: each place its half
    halves = [{"x": xs[:8], "y": ys[:8]}, {"x": xs[8:], "y": ys[8:]}]
    np.testing.assert_allclose(_train(compiled(), startup, loss, [halves] * 5), plain,
                               rtol=1e-5)
    with pytest.raises(ValueError, match="data-parallel"):
        fluid.Executor().run(fluid.CompiledProgram(main), feed=halves, fetch_list=[loss])
    test_prog = main.clone(for_test=True)
    train = compiled()
    shared = fluid.CompiledProgram(test_prog).with_data_parallel(share_vars_from=train)
    assert shared.program_for_executor() is test_prog
    with pytest.raises(ValueError, match="already data parallel"):
        train.with_data_parallel(loss_name=loss.name)
    with pytest.raises(ValueError, match="is not a variable"):
        fluid.CompiledProgram(main).with_data_parallel(loss_name="nope")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        fluid.CompiledProgram(main).with_data_parallel(places=[fluid.CUDAPlace(0)])


def test_with_inference_optimize_runs_the_inference_program():
    main, startup, loss = _regression()
    with fluid.program_guard(main):
        pred = main.global_block().var(main.global_block().ops[1].output("Out")[0])
    infer = main.clone(for_test=True)
    xs, ys = _batch()
    feed = {"x": xs, "y": ys}      # the test clone keeps the loss, which reads y
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        (want,) = exe.run(infer, feed=feed, fetch_list=[pred.name])
        compiled = fluid.CompiledProgram(infer).with_inference_optimize(config=object())
        (got,) = exe.run(compiled, feed=feed, fetch_list=[pred.name])
    np.testing.assert_array_equal(got, want)
    with pytest.raises(TypeError):
        fluid.CompiledProgram(infer).with_inference_optimize(None)


def test_parallel_executor_runs_fluids_old_data_parallel_loop(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    main, startup, loss = _regression()
    xs, ys = _batch(8)
    plain = _train(main, startup, loss, [{"x": xs, "y": ys}] * 3)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
        pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main)
        assert pe.device_count == 2
        (first,) = pe.run(fetch_list=[loss.name], feed={"x": xs, "y": ys})
        got = [float(np.mean(first))]
        # Fluid's per-device list form: one dict per place
        halves = [{"x": xs[:4], "y": ys[:4]}, {"x": xs[4:], "y": ys[4:]}]
        got.append(float(np.mean(pe.run([loss.name], feed=halves)[0])))
        got.append(float(np.mean(pe.run([loss.name], feed_dict={"x": xs, "y": ys})[0])))
        pe.drop_local_exe_scopes()
        test_pe = fluid.ParallelExecutor(use_cuda=False, main_program=main.clone(True),
                                         share_vars_from=pe)
        test_pe.run([loss.name], feed={"x": xs, "y": ys})
    assert first.shape == (2,) + np.shape(plain[0])[1:] or first.size == 2
    np.testing.assert_allclose(got, plain, rtol=1e-5)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        fluid.ParallelExecutor(use_cuda=True, loss_name=loss.name, main_program=main)


# --- Program / Block / Operator / Variable and program.desc ------------------------------
def test_program_desc_has_paddles_desc_api():
    main, startup, loss = _regression()
    desc = main.desc
    assert desc.num_blocks() == main.num_blocks == 1
    blob = desc.serialize_to_string()
    assert blob == desc.SerializeToString()
    again = fluid.Program.parse_from_string(blob)
    assert [op.type for op in again.global_block().ops] == \
        [op.type for op in main.global_block().ops]
    b0 = desc.block(0)
    assert b0.id == 0 and b0.parent == -1 and b0.op_size() == len(main.global_block().ops)
    mul = b0.op(0)
    assert mul.type == "mul" and mul.input("X") == ["x"] and "Y" in mul.input_names()
    assert mul.attr("x_num_col_dims") == 1 and mul.has_attr("op_role")
    assert b0.var("x").shape() == [-1, 3] and b0.var("x").dtype() == core.VarDesc.VarType.FP32
    assert b0.has_var("y") and not b0.has_var("nope") and b0.find_var("nope") is None
    desc.flush()
    infer = main.clone(for_test=True)
    with fluid.program_guard(infer):
        pass
    from fluidity.executor.executor import add_feed_fetch_ops
    with_io = add_feed_fetch_ops(infer, 0, ["x"], [loss.name])
    assert with_io.desc.get_feed_target_names() == ["x"]
    assert with_io.desc.get_fetch_target_names() == [loss.name]


def test_program_block_operator_variable_api():
    main, startup, loss = _regression()
    block = main.global_block()
    assert main.block(0) is block and main.current_block() is block
    assert main.random_seed == 7
    assert {v.name for v in main.list_vars()} >= {"x", "y", loss.name}
    text = main.to_string(True, with_details=True)
    assert "mul" in text and isinstance(text, str)
    mul = block.ops[0]
    assert mul.type == "mul" and mul.idx == 0 and block.ops[2].idx == 2
    assert mul.input("X") == ["x"] and mul.output_names == ["Out"]
    assert mul.attr("y_num_col_dims") == 1 and "x_num_col_dims" in mul.all_attrs()
    x = block.var("x")
    assert (x.name, tuple(x.shape), x.lod_level, x.persistable, x.stop_gradient) == \
        ("x", (-1, 3), 0, False, True)
    assert x.desc.name == "x" and "x" in x.to_string(True)
    # Variable.astype: a cast op that runs
    with fluid.program_guard(main, startup):
        as_int = x.astype("int64")
    assert block.ops[-1].type == "cast" and as_int.dtype == core.VarDesc.VarType.INT64
    # Fluid's Variable(block, ...) constructor declares the variable
    v = fluid.framework.Variable(block, name="made", shape=[2, 2], dtype="float32",
                                 persistable=True)
    assert block.has_var("made") and block.var("made").persistable and v.shape == (2, 2)
    # create_var / append_op / _prepend_op / _remove_op / _rename_input
    tmp = block.create_var(name="tmp", shape=[-1, 3], dtype="float32")
    block.append_op(type="scale", inputs={"X": [x]}, outputs={"Out": [tmp]},
                    attrs={"scale": 2.0})
    first = block._prepend_op(type="fill_constant", outputs={"Out": ["made"]},
                              attrs={"shape": [2, 2], "value": 1.0, "dtype": v.dtype})
    assert block.ops[0] is first and first.idx == 0
    n = len(block.ops)
    block._remove_op(0)
    assert len(block.ops) == n - 1 and block.ops[0].type == "mul"
    scale = block.ops[-1]
    scale._rename_input("x", "y")
    assert scale.input("X") == ["y"]
    # clone(for_test), _prune, _inference_optimize
    test_prog = main.clone(for_test=True)
    assert all(op.role & 0x3 == 0 for op in test_prog.global_block().ops)  # no grad/opt
    pruned = main._prune([loss])
    assert {op.type for op in pruned.global_block().ops} <= {
        "mul", "elementwise_add", "elementwise_sub", "square", "mean"}
    infer = main._inference_optimize(prune_read_op=True)
    assert infer is not main and len(infer.global_block().ops) == len(block.ops)


def test_unique_name_generate_guard_switch():
    with fluid.unique_name.guard():
        a = fluid.unique_name.generate("fc")
        b = fluid.unique_name.generate("fc")
    with fluid.unique_name.guard():
        assert fluid.unique_name.generate("fc") == a
    assert a != b and a.startswith("fc")
    with fluid.unique_name.guard("pre_"):
        assert fluid.unique_name.generate("x").startswith("pre_x")
    old = fluid.unique_name.switch()
    try:
        assert fluid.unique_name.generate("y") == "y_0"
    finally:
        fluid.unique_name.switch(old)


# --- transpiler names ---------------------------------------------------------------------
def test_transpiler_names():
    main, startup, loss = _regression()
    reused = fluid.transpiler.memory_optimize(input_program=main, skip_grads=True,
                                              print_log=False)
    assert all("@GRAD" not in new and "@GRAD" not in old for new, old in reused)
    xs, ys = _batch()
    assert _train(main, startup, loss, [{"x": xs, "y": ys}] * 2)
    fluid.release_memory(input_program=main)
    # the distribute transpiler is built (tests/transpiler/test_distribute.py)
    assert fluid.DistributeTranspiler is fluid.transpiler.DistributeTranspiler
    assert fluid.DistributeTranspilerConfig is fluid.transpiler.DistributeTranspilerConfig
    cfg = fluid.DistributeTranspilerConfig()
    assert cfg.slice_var_up and cfg.split_method is fluid.transpiler.RoundRobin
    assert fluid.transpiler.HashName(["a:1"]).dispatch(["w"]) == ["a:1"]
    for m in ("transpile", "get_trainer_program", "get_pserver_program",
              "get_pserver_programs", "get_startup_program"):
        assert callable(getattr(fluid.DistributeTranspiler(cfg), m))


# --- error types ----------------------------------------------------------------------------
def test_errors_are_fluids_builtin_types():
    from fluidity import errors
    assert issubclass(errors.ShapeError, ValueError)
    assert issubclass(errors.FeedError, ValueError)
    assert issubclass(errors.ProgramError, ValueError)
    assert issubclass(errors.VariableNotFoundError, ValueError)
    assert issubclass(errors.ArgumentTypeError, TypeError)
    assert issubclass(errors.ExecutionError, RuntimeError)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data("x", [3])
        with pytest.raises(TypeError, match="'input' in fluid.layers.fc must be Variable"):
            layers.fc(input=np.ones((2, 3), "float32"), size=2)
        with pytest.raises(TypeError):
            layers.elementwise_add(x, np.ones(3, "float32"))
        with pytest.raises(ValueError):
            main.global_block().var("nope")
        with pytest.raises(ValueError):
            layers.data("bad", [3], dtype="float128")


def test_weight_norm_param_attr_trains_g_and_v():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = layers.data("x", [3])
        y = layers.data("y", [1])
        h = layers.fc(x, 4, param_attr=fluid.WeightNormParamAttr(dim=1, name="w"))
        pred = layers.fc(h, 1, param_attr=fluid.WeightNormParamAttr(name="w2"))
        loss = layers.mean(layers.square_error_cost(pred, y))
        fluid.optimizer.SGD(0.05).minimize(loss)
    params = {p.name for p in main.all_parameters()}
    assert {"w_g", "w_v", "w2_g", "w2_v"} <= params and "w" not in params
    exe, scope = fluid.Executor(), fluid.Scope()
    xs, ys = _batch()
    with fluid.scope_guard(scope):
        exe.run(startup)
        v = np.array(scope.find_var("w_v").get_tensor())
        g = np.array(scope.find_var("w_g").get_tensor())
        np.testing.assert_allclose(g, np.sqrt((v ** 2).sum(0, keepdims=True)), rtol=1e-6)
        g2 = np.array(scope.find_var("w2_g").get_tensor())
        v2 = np.array(scope.find_var("w2_v").get_tensor())
        np.testing.assert_allclose(g2.reshape(-1), [np.sqrt((v2 ** 2).sum())], rtol=1e-6)
        # w = g * v / ||v|| equals v at the start: the layer computes x @ v
        (hv,) = exe.run(main.clone(for_test=True), feed={"x": xs, "y": ys}, fetch_list=[h])
        add = [op for op in main.global_block().ops if op.type == "elementwise_add"][0]
        bias = np.array(scope.find_var(add.input("Y")[0]).get_tensor())
        np.testing.assert_allclose(hv, xs @ v + bias, rtol=1e-5)
        losses = [float(np.mean(exe.run(main, feed={"x": xs, "y": ys},
                                        fetch_list=[loss])[0])) for _ in range(5)]
    assert losses[-1] < losses[0]


def test_install_check_trains_and_says_so(capsys):
    fluid.install_check.run_check()
    assert "installed successfully" in capsys.readouterr().out


def test_cpu_num_env_does_not_leak():
    assert "CPU_NUM" not in os.environ or os.environ["CPU_NUM"].isdigit()


def test_fluid_embedding_and_one_hot_append_a_dimension():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        ids = fluid.data(name="ids", shape=[None, 3], dtype="int64")
        emb = fluid.embedding(input=ids, size=[10, 4], padding_idx=0, param_attr="emb_w")
        hot = fluid.one_hot(input=ids, depth=10)
        loss = layers.mean(emb)
        fluid.optimizer.SGD(0.1).minimize(loss)
    assert tuple(emb.shape) == (-1, 3, 4) and tuple(hot.shape) == (-1, 3, 10)
    iv = np.array([[1, 0, 3], [4, 5, 9]], "int64")
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        table = np.array(scope.find_var("emb_w").get_tensor()).copy()
        e, h = exe.run(main, feed={"ids": iv}, fetch_list=[emb, hot])
    want = table[iv]
    want[iv == 0] = 0.0                   # padding_idx looks up zeros
    np.testing.assert_array_equal(e, want)
    np.testing.assert_array_equal(h, np.eye(10, dtype="float32")[iv])
    with pytest.raises(TypeError):
        fluid.embedding(input=ids, size=10)


def test_fluid_embedding_and_layers_embedding_differ_only_in_the_shape_rule():
    """One build (layers.nn.table_lookup): same table, same attrs; lookup_table replaces the
    ids' last 1 by dim, lookup_table_v2 appends dim."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        ids = fluid.data(name="ids", shape=[None, 1], dtype="int64")
        v1 = layers.embedding(ids, size=[10, 4], padding_idx=-1, param_attr="w",
                              is_sparse=True)
        v2 = fluid.embedding(ids, size=[10, 4], padding_idx=-1, param_attr="w",
                             is_sparse=True)
    assert tuple(v1.shape) == (-1, 4) and tuple(v2.shape) == (-1, 1, 4)
    ops = main.global_block().ops
    assert [op.type for op in ops] == ["lookup_table", "lookup_table_v2"]
    for attr in ("is_sparse", "is_distributed", "padding_idx"):
        assert ops[0].attr(attr) == ops[1].attr(attr)
    assert ops[0].attr("padding_idx") == 9
    iv = np.array([[1], [9], [3]], "int64")
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        a, b = exe.run(main, feed={"ids": iv}, fetch_list=[v1, v2])
    np.testing.assert_array_equal(a, b.reshape(3, 4))
    assert not a[1].any()

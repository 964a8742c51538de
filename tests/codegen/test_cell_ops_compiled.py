"""The ops that cut the seq2seq example's cell API (issue 29) compiled: transpose2, squeeze2
and unsqueeze2 over several dims known only at run time, against the interpreter, for
batches of several sizes and lengths, and trained through their gradients."""
import numpy as np
import pytest

import fluidity as fluid

from compiled_runs import train_both
from test_arrays_compiled import build, segments

L = fluid.layers


def padded(batch, time, width=3, seed=0):
    r = np.random.default_rng(seed)
    return {"x": r.uniform(-1, 1, (batch, time, width)).astype("float32")}


def rearranged():
    """[batch, time, 3] (both run-time dims) -> time-major and back through squeeze2 and
    unsqueeze2, then an fc over the rearranged value and a loss that trains it."""
    x = L.data("x", [-1, -1, 3], dtype="float32", append_batch_size=False)
    x.stop_gradient = False
    t = L.transpose(x, [1, 0, 2])                        # [time, batch, 3]
    u = L.unsqueeze(t, [0, 3])                           # [1, time, batch, 1, 3]
    s = L.squeeze(u, [3, 0])                             # [time, batch, 3]
    h = L.fc(s, 4, num_flatten_dims=2, act="tanh")      # [time, batch, 4]
    back = L.transpose(h, [1, 0, 2])                     # [batch, time, 4]
    loss = L.mean(back * back)
    fluid.optimizer.SGD(0.5).minimize(loss)
    return [t, s, back, loss]


@pytest.mark.parametrize("shapes", [[(2, 5), (3, 2)], [(1, 1)], [(4, 7)]],
                         ids=["two batches", "one by one", "four by seven"])
def test_rearranging_ops_over_two_run_time_dims_compile_and_train(shapes, caplog):
    main, startup, fetch = build(rearranged)
    segs, python = segments(main)
    assert len(segs) == 1 and not python, python
    feeds = [padded(b, t, seed=k) for k, (b, t) in enumerate(shapes)]
    want, got = train_both(main, startup, fetch, feeds, caplog)
    for w_step, g_step in zip(want.outs, got.outs):
        for w, g in zip(w_step, g_step):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for name, w in want.params.items():
        np.testing.assert_allclose(got.params[name], w, rtol=1e-5, atol=1e-6)


def test_squeezing_a_run_time_dim_still_runs_interpreted():
    """Whether a dim of unknown size is 1 is known only at run time: squeeze2 refuses."""
    def prog():
        x = L.data("x", [-1, -1, 3], dtype="float32", append_batch_size=False)
        return [L.squeeze(x, [1])]
    main, _, _ = build(prog)
    _, python = segments(main)
    assert [t for t, _ in python] == ["squeeze2"]


def masked_mean():
    """The cell API's masked loss: sequence_mask(len, maxlen=shape(x)[1]) over a padded
    batch, and a mask as wide as a fill_constant says."""
    x = L.data("x", [-1, -1, 3], dtype="float32", append_batch_size=False)
    n = L.data("n", [-1], dtype="int64", append_batch_size=False)
    mask = L.sequence_mask(n, maxlen=L.shape(x)[1], dtype="float32")
    wide = L.sequence_mask(n, maxlen=L.fill_constant([1], "int32", 4), dtype="int64")
    loss = L.reduce_sum(L.reduce_sum(x, dim=2) * mask) / L.reduce_sum(mask)
    return [mask, wide, loss]


@pytest.mark.parametrize("lengths,time", [([3, 0, 5, 1], 5), ([2], 7), ([9, 2], 4)],
                         ids=["ragged", "one shorter than the batch", "longer than maxlen"])
def test_sequence_mask_with_its_maxlen_from_a_shape_compiles(lengths, time, caplog):
    main, startup, fetch = build(masked_mean)
    segs, python = segments(main)
    assert len(segs) == 1 and not python, python
    feed = {**padded(len(lengths), time), "n": np.array(lengths, "int64")}
    want, got = train_both(main, startup, fetch, [feed], caplog)
    for w, g in zip(want.outs[0], got.outs[0]):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize("how", ["X's values", "a fed tensor"])
def test_sequence_mask_sized_by_data_runs_interpreted(how):
    def prog():
        n = L.data("n", [-1], dtype="int64", append_batch_size=False)
        m = L.data("m", [1], dtype="int32", append_batch_size=False)
        return [L.sequence_mask(n, maxlen=None if how == "X's values" else m)]
    main, _, _ = build(prog)
    _, python = segments(main)
    assert [t for t, _ in python] == ["sequence_mask"]
    why = python[0][1]
    assert ("X's values" in why) if how == "X's values" else ("only at run time" in why)


# --- expand ---------------------------------------------------------------------------------
def expanded():
    """The beam decoder's expand: a [batch, 1, 3] state tiled to every beam (times from the
    attribute), and a row tiled to the batch (times from shape(x)[0], known only at run
    time), trained through expand_grad."""
    x = L.data("x", [-1, 1, 3], dtype="float32", append_batch_size=False)
    x.stop_gradient = False
    tiled = L.expand(x, [1, 4, 1])
    row = L.create_parameter([1, 3], "float32", name="row")
    per_batch = L.expand(row, [L.shape(x)[0], L.fill_constant([1], "int32", 1)])
    loss = L.mean(L.reduce_sum(tiled, dim=1) * per_batch)
    fluid.optimizer.SGD(0.5).minimize(loss)
    return [tiled, per_batch, loss]


@pytest.mark.parametrize("batch", [3, 1])
def test_expand_with_times_from_a_shape_compiles_and_trains(batch, caplog):
    main, startup, fetch = build(expanded)
    segs, python = segments(main)
    assert len(segs) == 1 and not python, python
    r = np.random.default_rng(batch)
    feed = {"x": r.uniform(-1, 1, (batch, 1, 3)).astype("float32")}
    want, got = train_both(main, startup, fetch, [feed, feed], caplog)
    for w_step, g_step in zip(want.outs, got.outs):
        for w, g in zip(w_step, g_step):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got.params["row"], want.params["row"], rtol=1e-6)


def test_expand_gradient_is_the_numeric_one():
    from op_test import check_grad
    x = np.random.default_rng(1).uniform(-1, 1, (2, 1, 3))
    check_grad("expand", {"X": x}, ["X"], {"expand_times": [2, 3, 1]})


# --- assign_value: its values are literal data in the code ----------------------------------
def _assign_value_program(attrs):
    main = fluid.Program()
    block = main.global_block()
    out = block.create_var(name="out", dtype="float32")
    op = block.append_op("assign_value", {}, {"Out": [out]}, attrs)
    return main, op, out


def _refusal(main):
    _, python = segments(main)
    return dict(python).get("assign_value")


def test_assign_value_count_that_does_not_fill_its_shape_is_refused_and_named():
    main, _, out = _assign_value_program({"shape": [2, 3], "dtype": 5,
                                          "fp32_values": [1.0, 2.0]})
    assert "do not make a tensor" in _refusal(main)
    with pytest.raises(Exception, match="reshape"):
        fluid.Executor().run(main, fetch_list=[out], scope=fluid.Scope())


def test_assign_value_beyond_the_literal_limit_runs_interpreted():
    from fluidity.codegen.emit.literals import MAX_LITERAL_ELEMENTS
    n = MAX_LITERAL_ELEMENTS + 1
    main, _, out = _assign_value_program({"shape": [n], "dtype": 5,
                                          "fp32_values": [0.5] * n})
    assert "literal values" in _refusal(main)
    got = fluid.Executor().run(fluid.CompiledProgram(main).with_native_code(),
                               fetch_list=[out], scope=fluid.Scope())[0]
    assert got.shape == (n,) and (got == 0.5).all()


def test_assign_value_with_a_payload_in_its_values_never_reaches_the_source(tmp_path):
    """A crafted desc: text where the numbers go, in the list the dtype reads and in one it
    does not. Refused as the attribute's type check says; nothing of it in any source."""
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "security"))
    from hostile import set_raw_attr
    from fluidity.proto import framework_pb2 as pb
    payload = [f'1}}; fopen("{tmp_path}/CANARY", "w"); float pwn[] = {{1']
    for name in ("fp32_values", "int64_values"):
        main, op, _ = _assign_value_program({"shape": [1], "dtype": 5,
                                             "fp32_values": [1.0]})
        set_raw_attr(op.desc, name, pb.AttrType.STRINGS, payload)
        why = _refusal(main)
        assert why and f"attribute '{name}'" in why, why
    assert not (tmp_path / "CANARY").exists()


# --- gather_tree ----------------------------------------------------------------------------
def test_gather_tree_follows_a_known_tree():
    """Two steps, beam 2: the last step's beams came from beams 1 and 0 of the first."""
    from op_test import check_output
    ids = np.array([[[5, 6]], [[7, 8]]], np.int64)
    parents = np.array([[[0, 0]], [[1, 0]]], np.int64)
    check_output("gather_tree", {"Ids": ids, "Parents": parents},
                 {"Out": np.array([[[6, 5]], [[7, 8]]], np.int64)})


def test_a_parent_out_of_the_beam_stops_the_compiled_run_naming_it():
    from op_test import build_op
    from fluidity.errors import ExecutionError
    ids = np.zeros((2, 1, 3), np.int64)
    parents = np.array([[[0, 1, 2]], [[0, 3, -1]]], np.int64)
    main, _, feed, outs, _ = build_op("gather_tree", {"Ids": ids, "Parents": parents})
    compiled = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError,
                       match=r"'gather_tree'.*beam indices in \[0, 3\), got values in \[-1, 3\]"):
        fluid.Executor().run(compiled, feed=feed, fetch_list=outs["Out"], scope=fluid.Scope())


def test_a_range_to_a_cast_batch_size_compiles():
    """The beam decoder's batch index: range(0, cast(shape(x)[0], int64)), its end a cast of
    a dim, which compiled code knows (cast passes known values on)."""
    def prog():
        x = L.data("x", [-1, 3], dtype="float32", append_batch_size=False)
        n = L.cast(L.shape(x)[0], "int64")
        idx = L.range(L.fill_constant([1], "int64", 0), n, L.fill_constant([1], "int64", 1),
                      "int64")
        return [idx]
    main, startup, fetch = build(prog)
    segs, python = segments(main)
    assert len(segs) == 1 and not python, python
    want, got = train_both(main, startup, fetch, [{"x": np.zeros((5, 3), "float32")}])
    assert got.outs[0][0].tolist() == want.outs[0][0].tolist() == list(range(5))


def test_a_gather_nd_index_out_of_range_stops_the_compiled_run_naming_it():
    from op_test import build_op
    from fluidity.errors import ExecutionError
    x = np.zeros((3, 4), np.float32)
    index = np.array([[0, 1], [2, -5], [3, 0]], np.int64)
    main, _, feed, outs, _ = build_op("gather_nd", {"X": x, "Index": index})
    compiled = fluid.CompiledProgram(main).with_native_code()
    with pytest.raises(ExecutionError,
                       match=r"'gather_nd'.*index 3 is out of range for dim 0 of size 3"):
        fluid.Executor().run(compiled, feed=feed, fetch_list=outs["Out"], scope=fluid.Scope())


# --- tensor_array_to_tensor -----------------------------------------------------------------
def arrays_joined(axis, stack, gap=False):
    """Entries x, y (and x again) written to an array (at 0, 1, 2; at 0, 2, 3 with a gap
    the kernel skips), joined, and the result read by a later op: one segment makes the
    array and its HeldBufs, the next reads them, no Python step between."""
    def prog():
        x = L.data("x", [-1, 3], dtype="float32", append_batch_size=False)
        y = L.data("y", [-1, 3], dtype="float32", append_batch_size=False)
        arr = None
        for k, v in zip((0, 2, 3) if gap else (0, 1, 2), (x, y, x)):
            arr = L.array_write(v, L.fill_constant([1], "int64", k), array=arr)
        out, index = L.tensor_array_to_tensor(arr, axis=axis, use_stack=stack)
        return [L.scale(out, 2.0), index]
    return prog


@pytest.mark.parametrize("axis,stack,rows,gap", [
    (0, True, (2, 2), False), (1, True, (3, 3), False), (2, True, (1, 1), True),
    (0, False, (2, 4), False), (1, False, (3, 3), True), (-1, True, (2, 2), False)],
    ids=["stack 0", "stack 1", "stack last, a gap", "concat rows", "concat 1, a gap",
         "stack -1"])
def test_tensor_array_to_tensor_compiles_as_the_kernel(axis, stack, rows, gap, caplog):
    main, startup, fetch = build(arrays_joined(axis, stack, gap))
    segs, python = segments(main)
    assert len(segs) == 2 and not python, python
    r = np.random.default_rng(3)
    feed = {"x": r.uniform(-1, 1, (rows[0], 3)).astype("float32"),
            "y": r.uniform(-1, 1, (rows[1], 3)).astype("float32")}
    want, got = train_both(main, startup, fetch, [feed], caplog)
    for w, g in zip(want.outs[0], got.outs[0]):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_entries_that_do_not_stack_stop_the_compiled_run_as_numpy_does():
    main, _, fetch = build(arrays_joined(0, True))
    feed = {"x": np.ones((2, 3), "float32"), "y": np.ones((3, 3), "float32")}
    for prog in (main, fluid.CompiledProgram(main).with_native_code()):
        with pytest.raises(Exception, match="must have the same shape"):
            fluid.Executor().run(prog, feed=feed, fetch_list=fetch, scope=fluid.Scope())

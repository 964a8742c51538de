"""Compiled forms of Fluid 1.x ops beyond what the sample table (codegen_samples_lod.py,
compiled vs the kernels) checks: the gradient of training dropout (its forward draws a
random mask and runs as a Python step; a fixed seed gives both runs one mask), known
chunk counts, a Viterbi path against brute force, and a bad label named as the interpreter
names it."""
import numpy as np
import pytest
from codegen_samples import f32
from codegen_samples_lod import lod
from op_test import build_op, check_compiled_grads, compiled_ops

import fluidity as fluid
from fluidity.errors import ExecutionError


@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_training_dropouts_gradient_compiles_as_the_kernel(impl):
    attrs = {"dropout_prob": 0.3, "fix_seed": True, "seed": 5, "dropout_implementation": impl}
    done = check_compiled_grads("dropout", {"X": f32(4, 6)}, ["X"], attrs,
                                output_slots=["Out"], seed=3)
    assert "dropout_grad" in done


def _run_compiled(op_type, inputs, attrs, outputs):
    main, startup, feed, out_vars, _ = build_op(op_type, inputs, attrs, outputs)
    fetch = [v for vs in out_vars.values() for v in vs]
    assert op_type in compiled_ops(main)
    compiled = fluid.CompiledProgram(main).with_native_code()
    return fluid.Executor().run(compiled, feed=feed, fetch_list=fetch, scope=fluid.Scope())


def test_compiled_chunk_eval_counts_the_chunks_of_a_known_case():
    """IOB over 2 types (tags B-0 0, I-0 1, B-1 2, I-1 3, O 4): label chunks [0, 1] type 0,
    [3, 3] type 1 and [5, 6] type 0; inferred [0, 1] type 0 (correct), [3, 4] type 1 (wrong
    end); then a second sequence with one chunk found right."""
    lab = lod(np.array([[0], [1], [4], [2], [4], [0], [1], [2], [3]], np.int64), [7, 2])
    inf = lod(np.array([[0], [1], [4], [2], [3], [4], [4], [2], [3]], np.int64), [7, 2])
    outs = _run_compiled("chunk_eval", {"Inference": inf, "Label": lab},
                         {"chunk_scheme": "IOB", "num_chunk_types": 2},
                         ["Precision", "Recall", "F1-Score", "NumInferChunks",
                          "NumLabelChunks", "NumCorrectChunks"])
    p, r, f1, n_inf, n_lab, n_ok = (np.asarray(o).reshape(-1)[0] for o in outs)
    assert (n_inf, n_lab, n_ok) == (3, 4, 2)
    np.testing.assert_allclose([p, r, f1], [2 / 3, 2 / 4, 2 * (2 / 3) * 0.5 / (2 / 3 + 0.5)],
                               rtol=1e-6)


def test_a_crf_label_out_of_range_stops_the_compiled_run_naming_it():
    lens = [2, 3]
    inputs = {"Emission": lod(f32(5, 3), lens), "Transition": f32(5, 3),
              "Label": lod(np.array([[0], [2], [1], [3], [0]], np.int64), lens)}
    with pytest.raises(ExecutionError, match=r"linear_chain_crf: label 3 is out of range for "
                                             r"3 tags"):
        _run_compiled("linear_chain_crf", inputs, {}, None)


def test_compiled_viterbi_finds_the_path_a_brute_force_search_finds():
    """crf_decoding's compiled path scores highest of every tag path (exhaustive search over
    3 tags), per sequence."""
    import itertools
    rng = np.random.default_rng(11)
    lens, d = [4, 1, 3], 3
    x, w = rng.normal(size=(8, d)).astype(np.float32), rng.normal(size=(d + 2, d)).astype(
        np.float32)
    (path,) = _run_compiled("crf_decoding", {"Emission": lod(x, lens), "Transition": w}, {},
                            ["ViterbiPath"])
    path = np.asarray(path).reshape(-1)
    start = 0
    for n in lens:
        xs = x[start:start + n].astype(np.float64)

        def score(tags):
            return (w[0, tags[0]] + w[1, tags[-1]] + sum(xs[t, k] for t, k in enumerate(tags))
                    + sum(w[2 + a, b] for a, b in zip(tags, tags[1:])))
        best = max(itertools.product(range(d), repeat=n), key=score)
        assert tuple(path[start:start + n]) == best
        start += n


def test_a_sparse_gradients_parts_sum_compiled_and_train_as_interpreted():
    """One embedding table looked up twice with is_sparse: its two SelectedRows gradients are
    summed (rows and values concatenated) and SGD applies them; compiled, the sum and the
    update run native and the table ends as the interpreter leaves it."""
    from fluidity.codegen.explain import explain_rows
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        a = fluid.layers.data("a", shape=[1], dtype="int64")
        b = fluid.layers.data("b", shape=[1], dtype="int64")
        ea = fluid.layers.embedding(a, size=[10, 4], is_sparse=True, param_attr="tab")
        eb = fluid.layers.embedding(b, size=[10, 4], is_sparse=True, param_attr="tab")
        loss = fluid.layers.mean(fluid.layers.elementwise_mul(ea, eb))
        fluid.optimizer.SGD(0.5).minimize(loss)
    rows = [t for _, t, w, _ in explain_rows(main, 0, keep=[loss.name]) if w != "python"]
    assert "sum" in rows and "sgd" in rows
    feed = {"a": np.array([[1], [3], [1]], np.int64), "b": np.array([[3], [7], [2]], np.int64)}
    got = _tables_trained_both_ways(main, startup, feed, loss, 2)
    np.testing.assert_allclose(got[1], got[0], rtol=1e-6, atol=1e-7)


def _tables_trained_both_ways(main, startup, feed, loss, steps):
    """The table "tab" after `steps` runs of `main` interpreted, then compiled."""
    got = []
    for prog in (main, fluid.CompiledProgram(main).with_native_code(fetch_list=[loss])):
        scope = fluid.Scope()
        exe = fluid.Executor()
        exe.run(startup, scope=scope)
        for _ in range(steps):
            exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
        got.append(np.array(scope.find_var("tab").get_tensor()))
    return got


def _lookup_sgd_program(width, size, padding_idx, lr, seed):
    """(main, startup, looked-up rows, loss): `width` int64 ids a row looked up in table
    "tab" (is_sparse, uniform in [-1, 1]), the squared row sums' mean, plain SGD."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ids = fluid.layers.data("ids", shape=[width], dtype="int64")
        e = fluid.layers.embedding(ids, size=size, is_sparse=True, padding_idx=padding_idx,
                                   param_attr=fluid.ParamAttr(
                                       name="tab",
                                       initializer=fluid.initializer.Uniform(-1, 1)))
        loss = fluid.layers.mean(fluid.layers.square(fluid.layers.reduce_sum(e, dim=1)))
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, e, loss


def test_a_sparse_sgd_fused_into_its_lookup_grad_adds_rows_as_the_interpreter():
    """A table looked up with repeated ids (and a padding id): compiled, the lookup's
    gradient and its sgd are one loop adding each occurrence's row in turn (Paddle's
    SelectedRows sgd); interpreted, the SelectedRows gradient and the sgd op add the same
    rows in the same order: the tables agree bit for bit."""
    from fluidity.codegen.explain import explain_rows
    main, startup, e, loss = _lookup_sgd_program(4, [12, 5], 2, 0.3, seed=3)
    rows = explain_rows(main, 0, keep=[loss.name])
    assert any(t == "sgd" and why.startswith("fused into") for _, t, _, why in rows)
    feed = {"ids": np.array([[1, 5, 1, 1], [5, 2, 9, 1], [2, 2, 11, 5]], np.int64)}
    got = _tables_trained_both_ways(main, startup, feed, loss, 3)
    np.testing.assert_array_equal(got[1], got[0])


def test_lookups_longer_than_the_prefetch_distance_train_as_the_interpreter():
    """The compiled lookup and its fused sgd ask for rows ahead of the one they copy or
    update (sparse.h's lookup_rows, lookup_grad_sgd): with more ids than that distance, rows
    wider than the lines it prefetches, repeated ids and a padding id, the looked-up rows
    and the table match the interpreter's bit for bit."""
    main, startup, e, loss = _lookup_sgd_program(8, [50, 150], 7, 0.05, seed=4)
    feed = {"ids": np.random.default_rng(0).integers(0, 50, (40, 8)).astype(np.int64)}
    got = _tables_trained_both_ways(main, startup, feed, loss, 2)
    np.testing.assert_array_equal(got[1], got[0])
    rows = []
    for prog in (main, fluid.CompiledProgram(main).with_native_code(fetch_list=[e])):
        scope = fluid.Scope()
        exe = fluid.Executor()
        exe.run(startup, scope=scope)
        rows.append(np.asarray(exe.run(prog, feed=feed, fetch_list=[e], scope=scope)[0]))
    np.testing.assert_array_equal(rows[1], rows[0])
    assert not rows[0][feed["ids"] == 7].any()


def test_movers_compile_for_any_batch_size_only_when_they_keep_rows_apart():
    """With the batch dim unknown (-1), pixel_shuffle and pad2d (reflect) compile per row of
    the batch (their maps for 1 and 2 rows prove they never mix rows) and match the
    interpreter at two batch sizes; temporal_shift moves values between the rows of a
    segment, so it stays a Python step, saying why."""
    from fluidity.codegen.explain import explain_rows
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", shape=[8, 3, 4], dtype="float32")
        y = fluid.layers.pixel_shuffle(x, upscale_factor=2)
        z = fluid.layers.pad2d(y, paddings=[1, 2, 0, 1], mode="reflect")
        t = fluid.layers.temporal_shift(z, seg_num=2)
    rows = {t_: (w, why) for _, t_, w, why in explain_rows(main, 0, keep=[z.name, t.name])}
    assert rows["pixel_shuffle"][0] != "python" and rows["pad2d"][0] != "python"
    assert rows["temporal_shift"][0] == "python"
    assert "dim 0 is known only at run time" in rows["temporal_shift"][1]
    exe = fluid.Executor()
    compiled = fluid.CompiledProgram(main).with_native_code(fetch_list=[z, t])
    for n in (2, 4):
        feed = {"x": f32(n, 8, 3, 4)}
        want = exe.run(main, feed=feed, fetch_list=[z, t], scope=fluid.Scope())
        got = exe.run(compiled, feed=feed, fetch_list=[z, t], scope=fluid.Scope())
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("op_type", ["flip", "reverse"])
def test_a_repeated_flip_axis_runs_interpreted_and_fails_as_numpy(op_type):
    """np.flip refuses a repeated axis: the compiled path refuses the op, never flipping
    twice (or once) where the interpreter stops."""
    main, startup, feed, out_vars, _ = build_op(op_type, {"X": f32(2, 3)}, {"axis": [0, -2]},
                                                ["Out"])
    assert op_type not in compiled_ops(main)
    fetch = [v for vs in out_vars.values() for v in vs]
    with pytest.raises(Exception, match="repeated axis"):
        fluid.Executor().run(fluid.CompiledProgram(main).with_native_code(), feed=feed,
                             fetch_list=fetch, scope=fluid.Scope())

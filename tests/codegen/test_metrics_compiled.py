"""The streaming AUC compiled: batch after batch, its value and its in-place stats (the
sliding window, the totals, the batch counter) follow the interpreter's; bad predictions
stop the run naming the op."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen.explain import explain_rows
from fluidity.errors import ExecutionError


def _auc_program(slide_steps, num_thresholds):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        p = fluid.layers.data("p", [2])
        y = fluid.layers.data("y", [1], dtype="int64")
        auc, batch_auc, states = fluid.layers.auc(p, y, num_thresholds=num_thresholds,
                                                  slide_steps=slide_steps)
    return main, startup, [auc, batch_auc] + list(states)


def _batch(rng, n):
    q = rng.random(n).astype(np.float32)
    q[:2] = [0.0, 1.0]                      # both ends of the range, bucket 0 and the last
    y = (rng.random(n) < q).astype(np.int64).reshape(n, 1)
    return {"p": np.stack([1 - q, q], 1), "y": y}


@pytest.mark.parametrize("slide_steps, num_thresholds", [(1, 4095), (3, 200), (0, 50)])
def test_streaming_auc_compiled_follows_the_interpreter(slide_steps, num_thresholds):
    main, startup, fetch = _auc_program(slide_steps, num_thresholds)
    rng = np.random.default_rng(slide_steps)
    feeds = [_batch(rng, int(rng.integers(3, 40))) for _ in range(6)]
    compiled = fluid.CompiledProgram(main).with_native_code(fetch_list=fetch)
    rows = explain_rows(main, 0, keep=[v.name for v in fetch])
    assert [w for _, t, w, _ in rows if t == "auc"] == ["segment 0", "segment 0"]
    runs = {}
    exe = fluid.Executor()
    for kind, prog in (("interpreted", main), ("compiled", compiled)):
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        runs[kind] = [exe.run(prog, feed=f, fetch_list=fetch, scope=scope) for f in feeds]
    for step, (got, want) in enumerate(zip(runs["compiled"], runs["interpreted"])):
        for g, w, v in zip(got, want, fetch):
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=f"{v.name} step {step}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"{v.name} step {step}")


def test_a_nan_prediction_stops_the_compiled_auc_naming_it():
    main, startup, fetch = _auc_program(1, 100)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = _batch(np.random.default_rng(0), 5)
    feed["p"][3, 1] = np.nan
    compiled = fluid.CompiledProgram(main).with_native_code(fetch_list=fetch)
    with pytest.raises(ExecutionError, match=r"'auc'.*predictions must lie in \[0, 1\]"):
        exe.run(compiled, feed=feed, fetch_list=fetch, scope=scope)

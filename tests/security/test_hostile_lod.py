"""A fed LoD is checked before any op reads it (core/lod.py), on every path: the interpreter,
`with_native_code`, the CUDA plan (its host emulation here), `fluidity run`. Compiled
sequence ops read rows lod[i]..lod[i+1] without bounds checks, so an offset of 2**40 read past
the data or crashed, and the interpreter summed the wrong rows silently. Now each bad LoD is a
FeedError naming the variable, and nothing runs."""
import subprocess
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity.codegen import cuda
from fluidity.core.lod import lod_problem, offsets_problem
from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, FeedError, ShapeError

ROWS = 5
BAD = [
    ([[0, 5, 3]], "non-decreasing"),
    ([[1, 5]], "start at 0"),
    ([[0, 2, 4]], "ends at 4 but the tensor has 5 rows"),
    ([[0, 3000]], "ends at 3000"),
    ([[0, 1 << 40]], "ends at 1099511627776"),
    ([[0, 1 << 70]], "does not fit an int64"),
    ([[0, 2.5, 5]], "not an integer offset"),
    ([[0, -1, 5]], "non-decreasing"),
    ([[]], "no offsets"),
    ([[0, 1, 3], [0, 2, 5]], "level 0 ends at 3 but level 1 holds 2"),
]


def _program():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("seq_x", [-1, 3], "float32", lod_level=1)
        y = fluid.layers.sequence_pool(x, "sum")
        z = fluid.layers.scale(y, 2.0)
    return main, z.name


def _rows():
    return np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 3)


@pytest.fixture(params=["interpreter", "native", "cuda"])
def run(request, monkeypatch):
    main, out = _program()
    if request.param == "cuda":
        monkeypatch.setenv(cuda.EMULATE_ENV, "1")
    exe = fluid.Executor(fluid.CUDAPlace(0) if request.param == "cuda" else fluid.CPUPlace())
    prog = main if request.param != "native" else \
        fluid.CompiledProgram(main).with_native_code()

    def go(t):
        return exe.run(prog, feed={"seq_x": t}, fetch_list=[out], scope=fluid.Scope(),
                       return_numpy=False)[0]
    return go


def test_a_good_lod_runs_on_every_path(run):
    got = np.asarray(run(LoDTensor(_rows(), [[0, 2, 2, 5]])))
    want = 2 * np.stack([_rows()[0:2].sum(0), np.zeros(3), _rows()[2:5].sum(0)])
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("lod, why", BAD)
def test_a_bad_fed_lod_is_a_feed_error_naming_the_variable(run, lod, why):
    with pytest.raises(FeedError, match=why) as e:
        run(LoDTensor(_rows(), lod))
    assert "feed 'seq_x'" in str(e.value)


def test_lengths_never_held_against_the_rows_are_checked_at_the_feed(run):
    t = LoDTensor()
    t.set(_rows())
    t.set_recursive_sequence_lengths([[2, 3000]])     # Paddle's: not checked against rows
    assert not t.has_valid_recursive_sequence_lengths()
    with pytest.raises(FeedError, match="ends at 3002 but the tensor has 5 rows"):
        run(t)


def test_set_lod_checks_too():
    t = LoDTensor(_rows())
    for lod, why in BAD:
        with pytest.raises(ShapeError, match=why):
            t.set_lod(lod)


def test_a_compiled_step_checks_a_lod_it_did_not_see_fed(tmp_path):
    """A LoD that reached the scope some other way (a persistable set behind set_lod's back)
    never reaches generated code: the compiled step names the input."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = main.global_block().create_var(name="kept_seq", shape=[-1, 3], dtype="float32",
                                           lod_level=1, persistable=True)
        y = fluid.layers.sequence_pool(x, "sum")
    scope = fluid.Scope()
    t = scope.var("kept_seq").get_tensor()
    t.set(_rows())
    t._lod = [[0, 1 << 40]]
    with pytest.raises(ExecutionError, match="kept_seq' has a LoD that is not offsets of its "
                                             "rows"):
        fluid.Executor().run(fluid.CompiledProgram(main).with_native_code(),
                             fetch_list=[y], scope=scope)


def test_fluidity_run_refuses_a_bad_lod_naming_the_input(tmp_path):
    main, out = _program()
    exe = fluid.Executor()
    d = str(tmp_path / "model")
    fluid.io.save_inference_model(d, ["seq_x"], [main.global_block().var(out)], exe, main)
    np.save(tmp_path / "x.npy", _rows())
    for lod in ("0,3000", "0,4,2,5", "1,5"):
        r = subprocess.run([sys.executable, "-m", "fluidity.cli", "run", d, "-i",
                            f"seq_x={tmp_path / 'x.npy'}", "--lod", f"seq_x={lod}"],
                           capture_output=True, text=True)
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert "seq_x" in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("lod, why", BAD)
def test_the_one_check(lod, why):
    assert why in lod_problem(lod, ROWS)
    assert lod_problem([[0, 2, 5]], ROWS) is None and lod_problem([[0, 1, 2], [0, 2, 5]], 5) \
        is None
    assert offsets_problem(np.array([0, 2, 5], np.int64), 5) is None

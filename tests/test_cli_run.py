"""`fluidity run` and `fluidity show` on saved inference models, as a user runs them."""
import subprocess
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity import io as fio


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "fluidity.cli", *map(str, args)],
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A two-input model saved as a directory and as a prefix, plus inputs and outputs."""
    d = tmp_path_factory.mktemp("cli")
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5  # the same outputs every run
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        ids = fluid.layers.data("ids", [1], dtype="int64")
        e = fluid.layers.embedding(ids, [10, 3])
        h = fluid.layers.fc([x, e], 5, act="relu")
        y = fluid.layers.fc(h, 2, act="softmax")
    exe = fluid.Executor(fluid.CPUPlace())
    rng = np.random.default_rng(3)
    xv = rng.normal(size=(6, 4)).astype("float32")
    iv = rng.integers(0, 10, size=(6, 1)).astype("int64")
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        hv, yv = exe.run(main, feed={"x": xv, "ids": iv}, fetch_list=[h, y])
        fio.save_inference_model(d / "dir", ["x", "ids"], [y, h], exe, main)
        fio.save_inference_model(str(d / "pre" / "net"), [x, ids], [y, h], exe, main)
    np.save(d / "x.npy", xv.astype("float64"))   # a same-kind cast the CLI does for the user
    np.save(d / "ids.npy", iv)
    return d, yv, hv


@pytest.mark.parametrize("where", ["dir", "pre/net"])
def test_run_prints_and_saves_outputs(model, where):
    d, yv, hv = model
    r = _cli("run", d / where, "--input", f"x={d / 'x.npy'}", "-i", f"ids={d / 'ids.npy'}",
             "--output", d / f"out_{where.replace('/', '_')}.npz")
    assert r.returncode == 0, r.stderr
    assert "save_infer_model/scale_0: float32 [6, 2]" in r.stdout
    assert "save_infer_model/scale_1: float32 [6, 5]" in r.stdout
    first = yv.reshape(-1)[0]  # numpy prints fixed or scientific, as the values' range asks
    assert f"{first:.6f}"[:6] in r.stdout or f"{first:.6e}"[:6] in r.stdout
    assert r.stdout.count("\n  [") == 12     # a batch of 6 rows, each output row by row
    out = np.load(d / f"out_{where.replace('/', '_')}.npz")
    np.testing.assert_allclose(out["save_infer_model/scale_0"], yv, rtol=1e-6)
    np.testing.assert_allclose(out["save_infer_model/scale_1"], hv, rtol=1e-6)


def test_run_input_errors(model):
    d, *_ = model
    r = _cli("run", d / "dir", "--input", f"x={d / 'x.npy'}")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "missing input(s) ['ids']: the model's inputs are ['x', 'ids']" in r.stderr
    r = _cli("run", d / "dir", "-i", f"x={d / 'x.npy'}", "-i", f"ids={d / 'ids.npy'}",
             "-i", f"z={d / 'x.npy'}")
    assert r.returncode == 2 and "unknown input(s) ['z']" in r.stderr
    r = _cli("run", d / "dir", "-i", "x", "-i", f"ids={d / 'ids.npy'}")
    assert r.returncode == 2 and "expected NAME=FILE.npy" in r.stderr
    r = _cli("run", d / "dir", "-i", f"x={d / 'nope.npy'}", "-i", f"ids={d / 'ids.npy'}")
    assert r.returncode == 2 and "nope.npy: cannot read input 'x'" in r.stderr
    r = _cli("run", d / "missing", "-i", f"x={d / 'x.npy'}")
    assert r.returncode == 2 and "no inference model here" in r.stderr


def test_run_reports_a_broken_parameter_file(model, tmp_path):
    d, *_ = model
    import shutil
    shutil.copytree(d / "dir", tmp_path / "m")
    w = tmp_path / "m" / "fc_1.w_0"
    w.write_bytes(w.read_bytes()[:-4])
    (tmp_path / "m" / "__fluidity_manifest__.json").unlink()  # as Paddle's: no manifest
    r = _cli("run", tmp_path / "m", "-i", f"x={d / 'x.npy'}", "-i", f"ids={d / 'ids.npy'}")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "fc_1.w_0: variable 'fc_1.w_0': truncated data" in r.stderr


def test_show_accepts_directory_and_prefix(model):
    d, *_ = model
    for where in ("dir", "pre/net", "pre/net.pdmodel", "dir/__model__"):
        r = _cli("show", d / where)
        assert r.returncode == 0, r.stderr
        assert "Out=x = feed(X=feed) {col=0}" in r.stdout
        assert "Out=save_infer_model/scale_0 = scale(X=fc_1.tmp_2)" in r.stdout
    r = _cli("show", d)
    assert r.returncode == 2 and "without __model__" in r.stderr


def test_run_takes_sequence_inputs_with_their_lod(tmp_path):
    """A model over LoD sequences (Paddle's bag-of-words fixture): --lod gives an input's
    offsets, as the compiled executable takes them; bad or orphan --lod is named."""
    import os
    from paths import FIXTURES
    from test_paddle_zoo import _expected, assert_matches
    zoo = os.path.join(FIXTURES, "paddle_zoo", "text_bow")
    data = np.load(os.path.join(zoo, "input.npz"))
    np.save(tmp_path / "ids.npy", data["ids"])
    lod = ",".join(map(str, data["ids@lod"].tolist()))
    model = os.path.join(zoo, "model")
    r = _cli("run", model, "--input", f"ids={tmp_path / 'ids.npy'}", "--lod", f"ids={lod}",
             "--output", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out.npz")
    assert_matches([out[k] for k in out.files], _expected("text_bow"), "text_bow via run")
    r = _cli("run", model, "--input", f"ids={tmp_path / 'ids.npy'}", "--lod", "ids=0,x")
    assert r.returncode == 2 and "offsets must be integers" in r.stderr
    r = _cli("run", model, "--input", f"ids={tmp_path / 'ids.npy'}", "--lod", f"w={lod}")
    assert r.returncode == 2 and "--lod w: no --input of that name" in r.stderr


@pytest.fixture(scope="module")
def text_bow():
    """Paddle's bag-of-words model over LoD word ids, its input and expected output."""
    import os
    from paths import FIXTURES
    from test_paddle_zoo import _expected
    zoo = os.path.join(FIXTURES, "paddle_zoo", "text_bow")
    data = np.load(os.path.join(zoo, "input.npz"))
    return os.path.join(zoo, "model"), data["ids"], np.diff(data["ids@lod"]), \
        _expected("text_bow")


def _check_outputs(path, expected, what):
    from test_paddle_zoo import assert_matches
    out = np.load(path)
    assert_matches([out[k] for k in out.files], expected, what)


def test_run_takes_sequence_lengths_from_a_npy_file(text_bow, tmp_path):
    model, ids, lengths, expected = text_bow
    np.save(tmp_path / "ids.npy", ids)
    np.save(tmp_path / "len.npy", lengths)
    r = _cli("run", model, "--input", f"ids={tmp_path / 'ids.npy'}",
             "--lod", f"ids={tmp_path / 'len.npy'}", "--output", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    _check_outputs(tmp_path / "out.npz", expected, "text_bow with --lod LENGTHS.npy")
    np.save(tmp_path / "short.npy", lengths[:-1])        # covers fewer rows than ids has
    r = _cli("run", model, "--input", f"ids={tmp_path / 'ids.npy'}",
             "--lod", f"ids={tmp_path / 'short.npy'}")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"lod of 'ids': sequences cover {lengths[:-1].sum()} rows" in r.stderr
    assert f"but the input has {len(ids)}" in r.stderr
    np.save(tmp_path / "neg.npy", np.array([3, -1, 8]))
    r = _cli("run", model, "--input", f"ids={tmp_path / 'ids.npy'}",
             "--lod", f"ids={tmp_path / 'neg.npy'}")
    assert r.returncode == 2 and "non-negative integers" in r.stderr


def test_run_takes_inputs_and_their_lod_from_a_npz(text_bow, tmp_path):
    model, ids, lengths, expected = text_bow
    np.savez(tmp_path / "in.npz", **{"ids": ids, "ids.lod": lengths})
    r = _cli("run", model, "--input", tmp_path / "in.npz", "--output", tmp_path / "out.npz")
    assert r.returncode == 0, r.stderr
    _check_outputs(tmp_path / "out.npz", expected, "text_bow from an .npz")
    np.savez(tmp_path / "orphan.npz", **{"ids": ids, "ids.lod": lengths, "w.lod": lengths})
    r = _cli("run", model, "--input", tmp_path / "orphan.npz")
    assert r.returncode == 2 and "w.lod: no input named 'w' beside it" in r.stderr
    np.save(tmp_path / "ids.npy", ids)
    r = _cli("run", model, "--input", tmp_path / "in.npz", "--input",
             f"ids={tmp_path / 'ids.npy'}")
    assert r.returncode == 2 and "input 'ids' given twice" in r.stderr
    r = _cli("run", model, "--input", tmp_path / "missing.npz")
    assert r.returncode == 2 and "missing.npz: cannot read inputs" in r.stderr
    r = _cli("run", model, "--input", f"ids={tmp_path / 'in.npz'}")
    assert r.returncode == 2 and "holds several arrays; give an .npz without NAME=" in r.stderr

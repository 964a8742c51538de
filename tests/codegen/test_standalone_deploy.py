"""Deploying a compiled model as a user does: `model_run` on the .npz `fluidity run` takes
(inputs by name, NAME.lod sequence lengths), hostile .npz/.npy files refused by message and
never a crash, the BLAS linked only when the code calls it and never copied unless asked, a
failed compile leaving nothing behind, and models saved with other file names."""
import os
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from paths import FIXTURES
from test_paddle_zoo import _expected, assert_matches

import fluidity as fluid
from fluidity.codegen.build import CompileError
from fluidity.codegen.standalone import needed_libraries
from fluidity.compiler import compile_inference_model

ZOO = os.path.join(FIXTURES, "paddle_zoo")


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fluidity.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def _run(exe, *args):
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                          timeout=60)


@pytest.fixture(scope="module")
def bow(tmp_path_factory):
    """Paddle's bag-of-words model (a LoD input) compiled, with its input as an .npz."""
    d = tmp_path_factory.mktemp("bow")
    compile_inference_model(os.path.join(ZOO, "text_bow", "model"), str(d / "out"))
    data = np.load(os.path.join(ZOO, "text_bow", "input.npz"))
    ids, lengths = data["ids"], np.diff(data["ids@lod"])
    np.savez(d / "in.npz", **{"ids": ids, "ids.lod": lengths})
    return d, ids, lengths


def test_model_run_reads_the_npz_fluidity_run_takes(bow, tmp_path):
    d, ids, lengths = bow
    r = _run(d / "out" / "model_run", d / "in.npz", "-o", tmp_path)
    assert r.returncode == 0, r.stderr
    got = [np.load(p) for p in sorted(tmp_path.glob("*.npy"))]
    assert_matches(got, _expected("text_bow"), "text_bow from an .npz")
    r = _cli("run", os.path.join(ZOO, "text_bow", "model"), "--input", d / "in.npz")
    assert r.returncode == 0, r.stderr          # the same file, the same command line shape


def test_model_run_npz_errors_are_named(bow, tmp_path):
    d, ids, lengths = bow
    exe = d / "out" / "model_run"
    cases = {
        "orphan": ({"ids": ids, "ids.lod": lengths, "w.lod": lengths},
                   "w.lod: no input named 'w' beside it"),
        "unknown": ({"ids": ids, "ids.lod": lengths, "z": ids}, "the model has no input 'z'"),
        "short": ({"ids": ids, "ids.lod": lengths[:-1]}, "lod of 'ids': the sequences must cover"),
        "negative": ({"ids": ids, "ids.lod": -lengths}, "non-negative"),
        "float_lod": ({"ids": ids, "ids.lod": lengths.astype("float32")}, "1-D int32 or int64"),
        "no_lod": ({"ids": ids}, "input 'ids' needs its LoD"),
    }
    for name, (arrays, message) in cases.items():
        np.savez(tmp_path / f"{name}.npz", **arrays)
        r = _run(exe, tmp_path / f"{name}.npz", "-o", tmp_path / "o")
        assert r.returncode == 1 and message in r.stderr, (name, r.stderr)
    np.savez_compressed(tmp_path / "z.npz", ids=ids)
    r = _run(exe, tmp_path / "z.npz")
    assert r.returncode == 1 and "is compressed (np.savez_compressed)" in r.stderr
    assert "save it with np.savez" in r.stderr


def _hostile_files(tmp_path, ids, lengths):
    """Cut, forged and random .npz / .npy files: each must be refused with a message."""
    good = tmp_path / "good.npz"
    np.savez(good, **{"ids": ids, "ids.lod": lengths})
    data = good.read_bytes()
    rng = np.random.default_rng(0)
    files = {"empty.npz": b"", "random.npz": rng.bytes(4096), "magic.npz": b"PK\x05\x06" + b"\0" * 18}
    for cut in (10, 60, len(data) // 2, len(data) - 30, len(data) - 1):
        files[f"cut{cut}.npz"] = data[:cut]
    for _ in range(40):                   # single flipped bytes all over the archive
        b = bytearray(data)
        i = int(rng.integers(0, len(b)))
        b[i] ^= int(rng.integers(1, 256))
        files[f"flip{i}.npz"] = bytes(b)
    # a member header promising an enormous shape
    np.save(tmp_path / "ids.npy", ids)
    npy = (tmp_path / "ids.npy").read_bytes()
    huge = npy.replace(f"({len(ids)}, 1)".encode(), b"(99999999999999, 9)", 1)
    files["huge.npy"] = huge
    files["negative.npy"] = npy.replace(f"({len(ids)}, 1)".encode(), b"(-5, 1)", 1)
    files["noshape.npy"] = npy.replace(b"'shape'", b"'shapE'", 1)
    files["v9.npy"] = npy[:6] + b"\x09" + npy[7:]
    with zipfile.ZipFile(tmp_path / "big_offset.npz", "w") as z:   # a directory pointing out
        z.writestr("ids.npy", npy)
    b = bytearray((tmp_path / "big_offset.npz").read_bytes())
    eocd = b.rfind(b"PK\x05\x06")
    struct.pack_into("<I", b, eocd + 16, 0x7FFFFFF0)
    files["big_offset.npz"] = bytes(b)
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    return files


def test_model_run_refuses_hostile_files_without_crashing(bow, tmp_path):
    d, ids, lengths = bow
    exe = d / "out" / "model_run"
    for name in _hostile_files(tmp_path, ids, lengths):
        arg = tmp_path / name if name.endswith(".npz") else f"ids={tmp_path / name}"
        r = _run(exe, "--lod", f"ids=0,{len(ids)}", arg) if name.endswith(".npy") \
            else _run(exe, arg, "-o", tmp_path / "o")
        # a flipped byte may leave a valid file (in the data, say): then it runs; otherwise
        # the exit is 1 with a message, never a signal
        assert r.returncode in (0, 1), (name, r.returncode, r.stderr)
        if r.returncode == 1:
            assert r.stderr.startswith("model_run: error: "), (name, r.stderr)
            assert r.stderr.count("\n") == 1, (name, r.stderr)
        else:
            assert name.startswith("flip"), name


def test_a_model_without_matmuls_links_no_blas(tmp_path):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.relu(fluid.layers.scale(x, 2.0))
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        fluid.io.save_inference_model(str(tmp_path / "m"), ["x"], [y], exe, main)
    r = _cli("compile", tmp_path / "m", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert "blas       none (the model calls no BLAS routine)" in r.stdout
    for f in ("libfluidity_model.so", "model_run"):
        assert not any("openblas" in n for n in needed_libraries(str(tmp_path / "out" / f)))
    assert "libscipy_openblas.so" not in os.listdir(tmp_path / "out")
    np.save(tmp_path / "x.npy", np.array([[-1, 0.5, 2, -3]], np.float32))
    r = _run(tmp_path / "out" / "model_run", f"x={tmp_path / 'x.npy'}", "-o", tmp_path)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "save_infer_model_scale_0.npy"),
                                  [[0, 1, 4, 0]])


def test_a_failed_compile_leaves_nothing_behind(tmp_path, monkeypatch):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.fc(x, 3)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        fluid.io.save_inference_model(str(tmp_path / "m"), ["x"], [y], exe, main)
    before = sorted(os.listdir(tmp_path))
    monkeypatch.setenv("CXX", "false")            # a compiler that always fails
    with pytest.raises(CompileError):
        compile_inference_model(str(tmp_path / "m"), str(tmp_path / "a" / "b" / "out"))
    assert sorted(os.listdir(tmp_path)) == before  # no out/, no a/b/, no staging directory
    r = _cli("compile", tmp_path / "m", "-o", tmp_path / "out")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert sorted(os.listdir(tmp_path)) == before


def test_models_saved_with_other_file_names(tmp_path):
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 3
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.fc(x, 3)
    exe = fluid.Executor()
    xs = np.ones((2, 4), np.float32)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        want = exe.run(main, feed={"x": xs}, fetch_list=[y])[0]
        fluid.io.save_inference_model(str(tmp_path / "p"), ["x"], [y], exe, main,
                                      params_filename="__params__")
        fluid.io.save_inference_model(str(tmp_path / "c"), ["x"], [y], exe, main,
                                      model_filename="net", params_filename="weights")
    np.save(tmp_path / "x.npy", xs)
    r = _cli("run", tmp_path / "p", "-i", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "p.npz")
    assert r.returncode == 0, r.stderr                  # __params__ found on its own
    np.testing.assert_allclose(np.load(tmp_path / "p.npz")["save_infer_model/scale_0"], want,
                               rtol=1e-6)
    r = _cli("run", tmp_path / "c", "-i", f"x={tmp_path / 'x.npy'}")
    assert r.returncode == 2 and "a directory without __model__ (it holds:" in r.stderr
    assert "--model-filename" in r.stderr
    r = _cli("run", tmp_path / "c", "-i", f"x={tmp_path / 'x.npy'}", "--model-filename", "net")
    assert r.returncode == 2 and "--params-filename" in r.stderr and "weights" in r.stderr
    names = ["--model-filename", "net", "--params-filename", "weights"]
    r = _cli("run", tmp_path / "c", "-i", f"x={tmp_path / 'x.npy'}", *names)
    assert r.returncode == 0, r.stderr
    r = _cli("show", tmp_path / "c", "--model-filename", "net")
    assert r.returncode == 0 and "feeds (1):" in r.stdout
    r = _cli("compile", tmp_path / "c", *names, "--explain")
    assert r.returncode == 0 and "native segment" in r.stdout
    r = _cli("compile", tmp_path / "p", "-o", tmp_path / "pout")
    assert r.returncode == 0, r.stderr
    r = _run(tmp_path / "pout" / "model_run", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "po")
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "po" / "save_infer_model_scale_0.npy"), want,
                               rtol=1e-5)

"""`fluidity compile MODEL -o OUT/`: a saved model built as a native library + executable, run
with no Python (the executable on .npy files, the library through its C API), matching the
interpreter; models it cannot build, and bad inputs and parameter files, give messages that
name what is wrong.

The standalone build calls the same sgemm as the interpreter but with OpenBLAS's own thread
count, so its results are compared within float32 tolerance (rtol 1e-5), not bit for bit."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
from paths import FIXTURES
from test_paddle_zoo import _expected, assert_matches

import fluidity as fluid
from fluidity.codegen.build import CompileError
from fluidity.codegen.standalone import c_string
from fluidity.compiler import compile_inference_model, explain_inference_model

ZOO = os.path.join(FIXTURES, "paddle_zoo")


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fluidity.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """A saved 784-64-10 MLP, its standalone build and the interpreter's outputs on x."""
    d = tmp_path_factory.mktemp("mlp")
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", [784])
        h = fluid.layers.fc(x, 64, act="relu")
        y = fluid.layers.fc(h, 10, act="softmax")
    exe = fluid.Executor()
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(start)
        fluid.io.save_inference_model(str(d / "model"), ["x"], [y], exe, main)
        xs = np.random.default_rng(0).random((5, 784), dtype=np.float32)
        want = exe.run(main, feed={"x": xs}, fetch_list=[y])[0]
    np.save(d / "x.npy", xs)
    r = _cli("compile", str(d / "model"), "-o", str(d / "out"))
    assert r.returncode == 0, r.stderr
    return d, xs, want, "save_infer_model/scale_0"


def test_the_executable_runs_the_model_on_npy_files(mlp):
    d, xs, want, out_name = mlp
    out = d / "run1"
    r = subprocess.run([str(d / "out" / "model_run"), f"x={d / 'x.npy'}", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"{out_name}: float32 [5, 10]" in r.stdout
    got = np.load(out / (out_name.replace("/", "_") + ".npy"))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_the_build_holds_what_it_needs_to_run_elsewhere(mlp, tmp_path):
    """With --bundle-blas, OUT/ moved anywhere runs with no Python and no fluidity."""
    d, xs, want, out_name = mlp
    r = _cli("compile", str(d / "model"), "-o", str(tmp_path / "out"), "--bundle-blas")
    assert r.returncode == 0, r.stderr
    moved = tmp_path / "moved"
    os.rename(tmp_path / "out", moved)        # the library, BLAS and parameters go with it
    r = subprocess.run([str(moved / "model_run"), str(d / "x.npy"), "-o", str(tmp_path)],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(moved)) == [
        "fluidity_model.h", "libfluidity_model.so", "libscipy_openblas.so", "model.cc",
        "model.params", "model_run"]
    assert sorted(os.listdir(d / "out")) == [      # by default, no copy of the BLAS
        "fluidity_model.h", "libfluidity_model.so", "model.cc", "model.params", "model_run"]


class Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("ndim", ctypes.c_int), ("dims", ctypes.c_int64 * 8),
                ("data", ctypes.c_void_p), ("lod", ctypes.c_void_p),
                ("lod_len", ctypes.c_int64)]


def _tensor(a):
    code = {np.dtype("float32"): 5, np.dtype("float64"): 6, np.dtype("int64"): 3}[a.dtype]
    return Tensor(code, a.ndim, (ctypes.c_int64 * 8)(*a.shape), a.ctypes.data, None, 0)


def test_the_c_api_runs_clones_and_names_bad_input(mlp):
    d, xs, want, out_name = mlp
    lib = ctypes.CDLL(str(d / "out" / "libfluidity_model.so"))
    lib.fluidity_model_load.restype = ctypes.c_void_p
    lib.fluidity_model_clone.restype = ctypes.c_void_p
    lib.fluidity_model_clone.argtypes = [ctypes.c_void_p]
    lib.fluidity_model_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_char_p, ctypes.c_size_t]
    lib.fluidity_model_free.argtypes = [ctypes.c_void_p]
    lib.fluidity_model_input_name.restype = ctypes.c_char_p
    assert lib.fluidity_model_num_inputs() == 1
    assert lib.fluidity_model_input_name(0) == b"x"
    err = ctypes.create_string_buffer(512)
    m = lib.fluidity_model_load(str(d / "out" / "model.params").encode(), err, 512)
    assert m, err.value
    c = lib.fluidity_model_clone(m)
    out = (Tensor * 1)()
    for handle in (m, c):
        ins = (Tensor * 1)(_tensor(xs))
        assert lib.fluidity_model_run(handle, ins, out, err, 512) == 0, err.value
        got = np.ctypeslib.as_array(ctypes.cast(out[0].data, ctypes.POINTER(ctypes.c_float)),
                                    (out[0].dims[0], out[0].dims[1]))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    bad = xs.astype(np.float64)
    assert lib.fluidity_model_run(m, (Tensor * 1)(_tensor(bad)), out, err, 512) == 1
    assert err.value.decode() == "input 'x' is float64; the model takes float32"
    narrow = np.ascontiguousarray(xs[:, :100])
    assert lib.fluidity_model_run(m, (Tensor * 1)(_tensor(narrow)), out, err, 512) == 1
    assert "other shapes than the model was compiled for" in err.value.decode()
    assert "x: dim 1 is not 784" in err.value.decode()
    lib.fluidity_model_free(c)
    lib.fluidity_model_free(m)


def test_the_c_api_refuses_dims_whose_size_overflows(mlp):
    """A caller's dims are data: a product past int64 (or a negative dim) is refused before
    anything is sized from it."""
    d, xs, *_ = mlp
    lib = ctypes.CDLL(str(d / "out" / "libfluidity_model.so"))
    lib.fluidity_model_load.restype = ctypes.c_void_p
    lib.fluidity_model_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                       ctypes.c_char_p, ctypes.c_size_t]
    lib.fluidity_model_free.argtypes = [ctypes.c_void_p]
    err = ctypes.create_string_buffer(512)
    m = lib.fluidity_model_load(str(d / "out" / "model.params").encode(), err, 512)
    assert m, err.value
    out = (Tensor * 1)()
    for dims in ((1 << 62, 784), (-5, 784)):
        t = _tensor(xs)
        t.dims[0], t.dims[1] = dims
        assert lib.fluidity_model_run(m, (Tensor * 1)(t), out, err, 512) == 1
        assert "input 'x' has negative dims or more elements than int64 counts" in \
            err.value.decode()
    lib.fluidity_model_free(m)


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:len(b) // 2], "is cut short"),
    (lambda b: b + b"\0" * 8, "bytes left after the last parameter"),
    (lambda b: b"", "is not a LoDTensor record"),
])
def test_a_bad_parameter_file_is_refused_by_name(mlp, tmp_path, damage, message):
    d, *_ = mlp
    params = tmp_path / "p"
    params.write_bytes(damage((d / "out" / "model.params").read_bytes()))
    r = subprocess.run([str(d / "out" / "model_run"), "--params", str(params), str(d / "x.npy"),
                        "-o", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1
    assert message in r.stderr and str(params) in r.stderr
    assert not list(tmp_path.glob("*.npy"))


def test_the_executable_names_missing_and_unknown_inputs(mlp, tmp_path):
    d, *_ = mlp
    exe = str(d / "out" / "model_run")
    r = subprocess.run([exe, "-o", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 1 and "no value for input 'x'" in r.stderr
    r = subprocess.run([exe, f"y={d / 'x.npy'}"], capture_output=True, text=True)
    assert r.returncode == 1 and "no value for input 'x'" in r.stderr
    r = subprocess.run([exe, f"x={d / 'x.npy'}", f"y={d / 'x.npy'}"], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "the model has no input 'y'" in r.stderr
    np.save(tmp_path / "f.npy", np.ones((2, 784), np.float32).T)   # Fortran order
    r = subprocess.run([exe, str(tmp_path / "f.npy")], capture_output=True, text=True)
    assert r.returncode == 1 and "Fortran-ordered" in r.stderr


def _npy_with_header(path, header):
    h = header + " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h.encode() +
                     b"\0" * 64)


@pytest.mark.parametrize("shape, message", [
    ("(4611686018427387904, 784)", "not a tuple of at most 8 non-negative integers"),
    ("(-3, 784)", "not a tuple of at most 8 non-negative integers"),
    ("(5, 784", ""),                  # a header cut short: refused, not a hang
])
def test_the_executable_refuses_a_hostile_npy_header(mlp, tmp_path, shape, message):
    d, *_ = mlp
    bad = tmp_path / "bad.npy"
    _npy_with_header(bad, "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }")
    r = subprocess.run([str(d / "out" / "model_run"), f"x={bad}", "-o", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and message in r.stderr


def test_a_sequence_model_takes_its_lod_on_the_command_line(tmp_path):
    """text_bow: a LoD input (bag-of-words over variable-length sequences) vs Paddle's
    outputs."""
    out = tmp_path / "out"
    compile_inference_model(os.path.join(ZOO, "text_bow", "model"), str(out))
    data = np.load(os.path.join(ZOO, "text_bow", "input.npz"))
    np.save(tmp_path / "ids.npy", data["ids"])
    lod = ",".join(map(str, data["ids@lod"].tolist()))
    r = subprocess.run([str(out / "model_run"), "--lod", f"ids={lod}", f"ids={tmp_path}/ids.npy",
                        "-o", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = [np.load(p) for p in sorted(tmp_path.glob("*.npy")) if p.name != "ids.npy"]
    assert_matches(got, _expected("text_bow"), "text_bow standalone")
    r = subprocess.run([str(out / "model_run"), f"ids={tmp_path}/ids.npy"], capture_output=True,
                       text=True)
    assert r.returncode == 1 and "input 'ids' needs its LoD" in r.stderr


def test_a_model_with_an_op_that_does_not_compile_is_refused_naming_it(tmp_path):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.fc(x, 3)
        z = fluid.layers.Print(y, first_n=1)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        fluid.io.save_inference_model(str(tmp_path / "m"), ["x"], [z], exe, main)
    with pytest.raises(CompileError, match=r"op #\d+ 'print' in block 0"):
        compile_inference_model(str(tmp_path / "m"), str(tmp_path / "out"))
    assert "print" in explain_inference_model(str(tmp_path / "m"))
    r = _cli("compile", str(tmp_path / "m"), "-o", str(tmp_path / "out"))
    assert r.returncode == 2 and "cannot run without Python" in r.stderr
    assert not (tmp_path / "out" / "model_run").exists()


def test_compile_explain_lists_where_each_op_runs(mlp):
    d, *_ = mlp
    r = _cli("compile", str(d / "model"), "--explain")
    assert r.returncode == 0, r.stderr
    assert "1 native segment(s)" in r.stdout
    assert "mul" in r.stdout and "segment 0" in r.stdout


def test_names_become_c_strings_whatever_they_hold():
    assert c_string('a"b\\c') == '"a\\"b\\\\c"'
    assert c_string("é?") == '"\\303\\251\\077"'


# the 2.6.2 zoo, and the 3.3.1 zoo's models the 2.6.2 one lacks (sparse embeddings, 0-D
# outputs); the others are the same models, compiled in process by test_models.py
ZOO3 = os.path.join(FIXTURES, "paddle3_zoo")
STANDALONE = [pytest.param(ZOO, n, id=n) for n in sorted(os.listdir(ZOO))] + [
    pytest.param(ZOO3, n, id="3/" + n) for n in ("sparse_ctr", "zero_d_loss")]


@pytest.mark.parametrize("zoo, name", STANDALONE)
def test_every_paddle_zoo_model_runs_standalone_with_paddles_outputs(zoo, name, tmp_path):
    """Each model Paddle saved (tests/fixtures/paddle_zoo) builds to a standalone executable
    whose outputs on the fixture's inputs (LoD given with --lod) match Paddle's, 0-D outputs
    as 0-D .npy files; a model with an op that has no compiled form is refused naming it."""
    from test_paddle_zoo import _skip_if_pending
    _skip_if_pending(name, zoo)
    model = os.path.join(zoo, name, "model")
    from fluidity.codegen.explain import explain_rows
    with fluid.scope_guard(fluid.Scope()):
        prog, _, fetches = fluid.io.load_inference_model(model, fluid.Executor())
    python = [(i, t) for i, t, w, _ in explain_rows(prog, 0, keep=[v.name for v in fetches])
              if w == "python" and t not in ("feed", "fetch")]
    if python:
        i, t = python[0]
        with pytest.raises(CompileError, match=rf"op #{i} '{t}' in block 0"):
            compile_inference_model(model, str(tmp_path / "out"))
        return
    compile_inference_model(model, str(tmp_path / "out"))
    data = np.load(os.path.join(zoo, name, "input.npz"))
    args = [str(tmp_path / "out" / "model_run"), "-o", str(tmp_path / "res")]
    for k in data.files:
        if k.endswith("@lod"):
            args += ["--lod", f"{k[:-4]}=" + ",".join(map(str, data[k].tolist()))]
        else:
            np.save(tmp_path / f"{k}.npy", data[k])
            args.append(f"{k}={tmp_path / k}.npy")
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    names = [line.split(": ")[0] for line in r.stdout.splitlines()]
    got = [np.load(tmp_path / "res" / (n.replace("/", "_") + ".npy")) for n in names]
    assert_matches(got, _expected(name, zoo), f"{name} standalone")

"""Every `fluidity` subcommand given bad input: one line on stderr starting `fluidity: error:`
that names what is wrong, exit status 2, no traceback; and `show` escaping the control
characters a hostile model's names hold."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fluidity as fluid


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fluidity.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def _one_line_error(r, *parts):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.startswith("fluidity: error: "), r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    for p in parts:
        assert p in r.stderr, (p, r.stderr)


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    d = tmp_path_factory.mktemp("clierr")
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.fc(x, 2)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(start)
        fluid.io.save_inference_model(str(d / "m"), ["x"], [y], exe, main)
    np.save(d / "x.npy", np.ones((2, 4), np.float32))
    (d / "empty.npy").write_bytes(b"")
    (d / "corrupt.npz").write_bytes(b"PK\x03\x04" + b"\x00" * 60)
    np.savez(d / "good.npz", x=np.ones((2, 4), np.float32))
    data = (d / "good.npz").read_bytes()
    i = data.find(b"NUMPY")
    (d / "badmember.npz").write_bytes(data[:i] + b"NUMPX" + data[i + 5:])
    (d / "adir").mkdir()
    (d / "afile").write_text("x")
    return d


@pytest.mark.parametrize("args,parts", [
    (("run", "m", "-i", "x=empty.npy"), ["empty.npy", "the file is empty"]),
    (("run", "m", "-i", "corrupt.npz"), ["corrupt.npz", "cannot read inputs"]),
    (("run", "m", "-i", "badmember.npz"), ["badmember.npz"]),
    (("run", "m", "-i", "x=adir"), ["adir", "it is a directory"]),
    (("run", "m", "-i", "x.npy"), ["expected NAME=FILE.npy or FILE.npz"]),
    (("run", "m", "-i", "x=x.npy", "-o", "adir"), ["adir: is a directory"]),
    (("run", "m", "-i", "x=x.npy", "-o", "nodir/out.npz"), ["cannot write: no directory"]),
    (("run", "missing", "-i", "x=x.npy"), ["missing: no inference model here"]),
    (("run", "adir", "-i", "x=x.npy"), ["adir: a directory without __model__ (it is empty)"]),
    (("run", "afile", "-i", "x=x.npy"), ["afile"]),
    (("show", "missing"), ["missing: cannot read"]),
    (("show", "adir"), ["adir: a directory without __model__"]),
    (("show", "empty.npy"), ["empty.npy", "empty file"]),
    (("show", "m", "--model-filename", "nope"), ["no model file 'nope' here", "__model__"]),
    (("compile", "m", "-o", "afile/out"), ["afile is not a directory"]),
    (("compile", "m", "-o", "afile"), ["afile is not a directory"]),
    (("compile", "m"), ["give the output directory"]),
    (("compile", "missing", "--explain"), ["missing: no inference model here"]),
])
def test_bad_input_is_one_line(d, args, parts):
    _one_line_error(_cli(*args, cwd=d), *parts)


def test_compile_to_an_unwritable_place_leaves_nothing(d, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        if os.access(ro, os.W_OK):           # root writes anyway: nothing to test here
            pytest.skip("running as a user the permissions do not bind")
        r = _cli("compile", d / "m", "-o", ro / "out")
        _one_line_error(r, "cannot make the output directory")
        assert os.listdir(ro) == []
    finally:
        os.chmod(ro, 0o700)


def test_show_escapes_control_characters_in_names(tmp_path):
    """A model whose variable and op names hold ANSI escapes, newlines and BEL: `show`
    prints them escaped, so the listing keeps one line per variable and op."""
    prog = fluid.Program()
    block = prog.global_block()
    evil = "x\x1b[31mRED\x1b[0m\nfake line\x07"
    block.create_var(name=evil, shape=[2], dtype="float32")
    block.create_var(name="out", shape=[2], dtype="float32")
    block.append_op(type="scale", inputs={"X": [evil]}, outputs={"Out": ["out"]},
                    attrs={"scale": 2.0})
    (tmp_path / "__model__").write_bytes(prog.serialize_to_string())
    r = _cli("show", tmp_path)
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\x1b" not in r.stderr
    assert "x\\x1b[31mRED\\x1b[0m\\nfake line\\x07" in r.stdout
    assert not any(ln.startswith("fake line") for ln in r.stdout.splitlines())


def test_an_unexpected_error_is_one_line_too(d, monkeypatch, capsys):
    """A fault inside the library (here a kernel raising a plain exception) is one line
    naming its type; FLUIDITY_LOG_LEVEL=DEBUG shows the traceback."""
    from fluidity import cli
    from fluidity import io as fio

    def broken(*a, **k):
        raise KeyError("boom")
    monkeypatch.setattr(fio, "load_inference_model", broken)
    assert cli.main(["run", str(d / "m"), "-i", f"x={d / 'x.npy'}"]) == 2
    err = capsys.readouterr().err
    assert err == "fluidity: error: KeyError: 'boom' (FLUIDITY_LOG_LEVEL=DEBUG shows where)\n"

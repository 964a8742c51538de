"""`fluidity ops` and `fluidity show` as a user runs them."""
import subprocess
import sys

import numpy as np

import fluidity as fluid
from fluidity.cli import main


def _run(*args):
    return subprocess.run([sys.executable, "-m", "fluidity.cli", *args], capture_output=True,
                          text=True)


def test_ops_lists_registry(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    for t in ("feed", "fetch", "mul", "elementwise_add", "lookup_table", "softmax"):
        assert f"\n{t}(" in "\n" + out
    assert main(["ops", "elementwise_*", "-v"]) == 0
    out = capsys.readouterr().out
    assert "axis=-1" in out and "\nmul(" not in "\n" + out
    assert "compiled for: cpu, cuda" in out                       # elementwise_add
    assert main(["ops", "print", "-v"]) == 0        # I/O on the run itself: never compiled
    assert "compiled for: none (runs in Python)" in capsys.readouterr().out


def test_ops_without_a_match_says_so_and_fails():
    r = _run("ops", "no_such_op*")
    assert r.returncode == 1 and r.stdout == ""
    assert "no op matches 'no_such_op*'" in r.stderr


def test_version():
    r = _run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"fluidity {fluid.__version__}"


def test_show_starts_with_feeds_fetches_and_parameters_in_natural_order(tmp_path):
    main_p, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main_p, startup), fluid.unique_name.guard():
        slots = [fluid.layers.data(f"C{i}", [1]) for i in (10, 2, 1)]
        h = fluid.layers.fc(slots, 3)                       # 3 x [1, 3] weights + [3] bias
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.save_inference_model(str(tmp_path / "m"), ["C10", "C2", "C1"], [h], exe,
                                      main_p)
    r = _run("show", str(tmp_path / "m"))
    assert r.returncode == 0, r.stderr
    head = r.stdout.split("program (")[0].splitlines()
    assert head[0] == "feeds (3):" and [s.split()[0] for s in head[1:4]] == ["C10", "C2", "C1"]
    assert head[4] == "fetches (1):" and head[5].split()[0].startswith("save_infer_model")
    assert head[6] == "parameters: 4 tensors, 12 values (48 B)"
    listed = [ln.split()[0] for ln in r.stdout.split("vars:")[1].splitlines()[1:]
              if ln.startswith("    C")]
    assert listed == ["C1", "C2", "C10"]


def test_show_saved_program(tmp_path):
    main_p, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main_p, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        e = fluid.layers.embedding(ids, [7, 3])
        fluid.layers.fc([x, e], 2, act="softmax")
    path = tmp_path / "__model__"
    path.write_bytes(main_p.serialize_to_string())
    r = _run("show", str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("feeds (no feed ops; the data variables) (2):\n    ids : ")
    assert "fetches (0): none\nparameters: 4 tensors, 35 values (140 B)\n" in r.stdout
    assert "ids : int64[-1, 1] lod_level=1 (stop_gradient)" in r.stdout
    assert "fc_0.w_0 : float32[3, 2] (persistable, parameter)" in r.stdout
    assert ("Out=fc_0.tmp_0 = mul(X=x, Y=fc_0.w_0) {force_fp32_output=False, scale_out=1, "
            "scale_x=1, scale_y=[1.0], use_mkldnn=False, x_num_col_dims=1, y_num_col_dims=1}"
            in r.stdout)    # mul's attributes as Fluid 1.8 writes them


def test_show_bad_files(tmp_path):
    garbage = tmp_path / "garbage.pdmodel"
    garbage.write_bytes(b"\x00\x01not a program at all\xff\xff")
    r = _run("show", str(garbage))
    assert r.returncode == 2 and "garbage.pdmodel" in r.stderr and "Traceback" not in r.stderr
    empty = tmp_path / "empty.pdmodel"
    empty.write_bytes(b"")
    r = _run("show", str(empty))
    assert r.returncode == 2 and "empty file" in r.stderr
    r = _run("show", str(tmp_path / "missing"))
    assert r.returncode == 2 and "cannot read" in r.stderr
    prog = fluid.Program()
    prog.global_block().create_var(name="x", shape=[3])
    trunc = tmp_path / "trunc.pdmodel"
    trunc.write_bytes(prog.serialize_to_string()[:-3])
    r = _run("show", str(trunc))
    assert r.returncode == 2 and "trunc.pdmodel" in r.stderr

"""Save/load programs interchange with PaddlePaddle: fluid.io's save and load programs
(Paddle's save / save_combine / load / load_combine ops) built here run in Paddle and write
the same bytes; Paddle's own save programs run here; each side loads the other's files.
The four ops' schemas are Paddle's. Runs where /work/main/.venv-paddle (PaddlePaddle)
exists, skipped elsewhere."""
import json
import os
import subprocess

import numpy as np
import pytest

import fluidity as fluid
from fluidity.io.variables import io_program
from fluidity.ops import registry
from io_models import picture

PADDLE_PYTHON = "/work/main/.venv-paddle/bin/python"
HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.skipif(not os.path.exists(PADDLE_PYTHON),
                                reason="PaddlePaddle's Python is not installed here")

VALUES = {"w": np.arange(12, dtype="float32").reshape(3, 4) / 7,
          "ids": np.array([3, 1, 4, 1, 5], dtype="int64"),
          "seq": np.arange(10, dtype="float64").reshape(5, 2),
          "half": np.linspace(-1, 1, 6).astype("float16")}
LODS = {"seq": [[0, 2, 5]]}
DENSE = sorted(n for n in VALUES if n not in LODS)


def _vars(block, names):
    return [block.create_var(name=n, shape=VALUES[n].shape, dtype=VALUES[n].dtype,
                             lod_level=len(LODS.get(n, [])), persistable=True)
            for n in names]


def _fill(scope):
    for n, v in VALUES.items():
        t = scope.var(n).get_tensor()
        t.set(v)
        if n in LODS:
            t.set_lod(LODS[n])


def _write(path, program):
    with open(path, "wb") as f:
        f.write(program.serialize_to_string())


@pytest.fixture(scope="module")
def exchanged(tmp_path_factory):
    """Run the Paddle side once over the programs and files made here."""
    work = tmp_path_factory.mktemp("paddle")
    np.savez(work / "values.npz", **VALUES)
    json.dump(LODS, open(work / "lods.json", "w"))
    block = fluid.Program().global_block()
    all_vars, dense = _vars(block, sorted(VALUES)), _vars(block, DENSE)
    _write(work / "save_sep.prog", io_program("save", "save_combine", str(work / "in_paddle_sep"),
                                              all_vars, None, "inputs"))
    _write(work / "save_comb.prog", io_program("save", "save_combine",
                                               str(work / "in_paddle_comb"), dense, "comb",
                                               "inputs"))
    with fluid.scope_guard(fluid.Scope()):  # fluid.io's own saves, for Paddle to load
        _fill(fluid.global_scope())
        exe = fluid.Executor(fluid.CPUPlace())
        fluid.io.save_vars(exe, str(work / "ours_sep"), vars=all_vars)
        fluid.io.save_vars(exe, str(work / "ours_comb"), vars=dense, filename="comb")
    _write(work / "load_sep.prog", io_program("load", "load_combine", str(work / "ours_sep"),
                                              all_vars, None, "outputs"))
    _write(work / "load_comb.prog", io_program("load", "load_combine", str(work / "ours_comb"),
                                               dense, "comb", "outputs"))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    r = subprocess.run([PADDLE_PYTHON, os.path.join(HERE, "paddle_side.py"), str(work)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    return work


def test_op_schemas_are_paddles(exchanged):
    protos = json.load(open(exchanged / "protos.json"))
    assert sorted(protos) == ["load", "load_combine", "save", "save_combine"]
    for op_type, proto in protos.items():
        ours = registry.get(op_type)
        for slots, theirs in ((ours.inputs, proto["inputs"]), (ours.outputs, proto["outputs"])):
            assert [[s.name, s.duplicable, s.dispensable] for s in slots] == theirs, op_type
        for name, attr_type in proto["attrs"].items():
            assert ours.declares(name), (op_type, name)
            assert ours.attr_type(name) == getattr(registry.AttrType, attr_type), (op_type, name)


def test_our_save_programs_write_the_same_bytes_in_paddle(exchanged):
    assert picture(str(exchanged / "in_paddle_sep")) == \
        {k: v for k, v in picture(str(exchanged / "ours_sep")).items()
         if k != fluid.io.manifest.MANIFEST}
    assert (exchanged / "in_paddle_comb" / "comb").read_bytes() == \
        (exchanged / "ours_comb" / "comb").read_bytes()


def test_paddle_loads_our_files_with_our_load_programs(exchanged):
    for tag, names in (("sep", sorted(VALUES)), ("comb", DENSE)):
        got = np.load(exchanged / f"paddle_loaded_{tag}.npz")
        lods = json.load(open(exchanged / f"paddle_loaded_{tag}.json"))
        assert sorted(got.files) == names
        for n in names:
            np.testing.assert_array_equal(got[n], VALUES[n])
            assert got[n].dtype == VALUES[n].dtype
            assert lods[n] == LODS.get(n, [])


def test_paddles_save_programs_run_here_and_its_files_load(exchanged, tmp_path):
    progs = sorted(exchanged.glob("paddle_save_*.prog"))
    assert len(progs) == 2
    block = fluid.Program().global_block()
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor(fluid.CPUPlace())
        fluid.io.load_vars(exe, str(exchanged / "paddle_sep"), vars=_vars(block, sorted(VALUES)))
        fluid.io.load_vars(exe, str(exchanged / "paddle_comb"), vars=_vars(block, DENSE),
                           filename="comb")
        for n, v in VALUES.items():
            t = fluid.global_scope().find_var(n).get_tensor()
            np.testing.assert_array_equal(np.array(t), v)
            assert t.lod() == LODS.get(n, [])
    paddle_files = {d: picture(str(exchanged / d)) for d in ("paddle_sep", "paddle_comb")}
    for d in paddle_files:
        os.rename(exchanged / d, tmp_path / d)
    with fluid.scope_guard(fluid.Scope()):
        _fill(fluid.global_scope())
        exe = fluid.Executor(fluid.CPUPlace())
        for path in progs:  # Paddle's programs, as Paddle built them, run here
            program = fluid.Program.parse_from_string(path.read_bytes())
            assert {op.type for op in program.global_block().ops} <= {"save", "save_combine"}
            exe.run(program)
    for d, files in paddle_files.items():
        assert picture(str(exchanged / d)) == files

"""Fluid 1.6+'s fluid.io.save / load / load_program_state / set_program_state: the
.pdparams / .pdopt / .pdmodel trio, saved as one atomic group, read back safely."""
import io
import os
import pickle
import pickletools
import re

import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import FluidityError, FormatError, ShapeError
from fluidity.io import ManifestError
from io_models import same_values, set_values, values

PARAMS = ["b1", "b2", "w1", "w2"]


class _RunsCode:
    """What a malicious state file holds: unpickling it would run a shell command."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)



def test_save_writes_the_trio_and_load_restores_everything(model, tmp_path):
    exe, main, startup, _ = model
    set_values(main, 3)
    want = values(main)
    fluid.io.save(main, str(tmp_path / "m" / "model"))
    names = sorted(os.listdir(tmp_path / "m"))
    assert names == ["__fluidity_manifest__.json", "model.pdmodel", "model.pdopt",
                     "model.pdparams"]
    params = pickle.load(open(tmp_path / "m" / "model.pdparams", "rb"))
    assert sorted(params) == PARAMS
    np.testing.assert_array_equal(params["w1"], want["w1"])
    opt = pickle.load(open(tmp_path / "m" / "model.pdopt", "rb"))
    assert "w1_moment1_0" in opt and "@LR_DECAY_COUNTER@" in opt and "w1" not in opt
    prog = fluid.Program.parse_from_string(open(tmp_path / "m" / "model.pdmodel", "rb").read())
    assert [op.type for op in prog.global_block().ops] == \
        [op.type for op in main.global_block().ops]
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.load(main, str(tmp_path / "m" / "model"), exe)
        assert same_values(values(main), want)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        state = fluid.io.load_program_state(str(tmp_path / "m" / "model.pdparams"))
        assert sorted(state) == sorted(want)
        assert fluid.io.set_program_state(main, {**state, "extra": np.zeros(1)}) == ["extra"]
        assert same_values(values(main), want)


def test_load_from_a_persistables_directory_and_combined_file(model, tmp_path):
    exe, main, startup, _ = model
    set_values(main, 4)
    want = values(main)
    fluid.io.save_persistables(exe, str(tmp_path / "dir"), main)
    fluid.io.save_persistables(exe, str(tmp_path / "c"), main, filename="all")
    pers = [v for v in main.list_vars() if fluid.io.is_persistable(v)]
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.load(main, str(tmp_path / "dir"), exe)
        assert same_values(values(main), want)
    state = fluid.io.load_program_state(str(tmp_path / "c" / "all"), var_list=pers)
    assert same_values(state, want)
    with pytest.raises(FluidityError, match=r"c/all: a combined parameter file has no names"):
        fluid.io.load_program_state(str(tmp_path / "c" / "all"))


def _globals(data):
    """The (module, name) pairs a pickle's GLOBAL opcodes import."""
    return {tuple(arg.split(" ")) for op, arg, _ in pickletools.genops(data)
            if op.name == "GLOBAL"}


def test_state_pickles_name_only_what_numpy_1_and_2_both_have(model, tmp_path):
    """numpy 2's own array pickles name numpy._core, which numpy < 1.26 (Paddle 2.x
    environments) cannot import: ours name numpy.ndarray and numpy.dtype only, and still
    round-trip every array kind a state holds."""
    exe, main, startup, _ = model
    set_values(main, 5)
    want = values(main)
    fluid.io.save(main, str(tmp_path / "model"))
    for suffix in (".pdparams", ".pdopt"):
        data = open(tmp_path / ("model" + suffix), "rb").read()
        assert b"numpy._core" not in data
        assert {m for m, _ in _globals(data)} <= {"numpy", "_codecs"}, _globals(data)
    arrays = {"f32": np.arange(6, dtype=np.float32).reshape(2, 3),
              "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
              "strided": np.arange(12).reshape(3, 4)[:, ::2], "zero_d": np.array(7, np.int64),
              "bool": np.array([True, False]), "empty": np.zeros((0, 4), np.float16)}
    from fluidity.io.program_state import _ArrayPickler, _read_pickle
    buf = io.BytesIO()
    _ArrayPickler(buf, protocol=2).dump(arrays)
    assert _globals(buf.getvalue()) <= {("numpy", "ndarray"), ("numpy", "dtype"),
                                        ("_codecs", "encode"), ("__builtin__", "bytes")}
    path = tmp_path / "arrays.pdparams"
    path.write_bytes(buf.getvalue())
    for back in (pickle.loads(buf.getvalue()), _read_pickle(str(path))):
        for k, a in arrays.items():
            assert back[k].dtype == a.dtype and back[k].shape == a.shape, k
            np.testing.assert_array_equal(back[k], a)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.load(main, str(tmp_path / "model"), exe)
        assert same_values(values(main), want)


def test_load_reads_pickles_of_numpy_1_and_numpy_2(model, tmp_path):
    """Files Paddle 2.x (numpy 1.x: numpy.core.multiarray) and Paddle 3.x or our old writer
    (numpy 2: numpy._core.multiarray) wrote still load."""
    exe, main, startup, _ = model
    set_values(main, 7)
    want = values(main)
    prefix = str(tmp_path / "model")
    fluid.io.save(main, prefix)
    os.remove(tmp_path / "__fluidity_manifest__.json")   # rewritten below by hand
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        for suffix in (".pdparams", ".pdopt"):
            state = pickle.load(open(prefix + suffix, "rb"))
            data = re.sub(rb"numpy\.(_core|core)\.multiarray\n", module.encode() + b"\n",
                          pickle.dumps(state, protocol=2))
            assert (module, "_reconstruct") in _globals(data)
            with open(prefix + suffix, "wb") as f:
                f.write(data)
        with fluid.scope_guard(fluid.Scope()):
            exe.run(startup)
            fluid.io.load(main, prefix, exe)
            assert same_values(values(main), want)


def test_bad_state_files(model, tmp_path):
    exe, main, startup, _ = model
    prefix = str(tmp_path / "model")
    fluid.io.save(main, prefix)
    other = fluid.Program()                      # a program whose w2 is [8, 5]
    other.global_block().create_parameter(name="w2", shape=[8, 5], dtype="float32")
    with pytest.raises(ShapeError, match=r"model.pdparams: variable 'w2' is \[8, 5\] in the "
                                         r"program, but the loaded value has shape \[8, 3\]"):
        fluid.io.load(other, prefix, exe)
    os.remove(tmp_path / "__fluidity_manifest__.json")   # the unpickler's own checks
    marker = tmp_path / "ran"
    with open(prefix + ".pdparams", "wb") as f:
        pickle.dump({"w1": _RunsCode(f"touch {marker}")}, f, protocol=2)
    with pytest.raises(FormatError, match=r"model.pdparams: not a state dict of arrays "
                                          r"\(UnpicklingError: posix.system is not part"):
        fluid.io.load_program_state(prefix)
    assert not marker.exists()
    with open(prefix + ".pdparams", "wb") as f:
        pickle.dump({"w1": np.zeros((4, 8), "float32")}, f, protocol=2)
    with pytest.raises(FluidityError, match=r"model.pdparams: no value for variables "
                                            r"\['b1', 'w2', 'b2'\]"):
        fluid.io.load(main, prefix, exe)


def test_trio_is_one_group(model, tmp_path):
    exe, main, startup, _ = model
    prefix = str(tmp_path / "model")
    fluid.io.save(main, prefix)
    data = bytearray(open(prefix + ".pdopt", "rb").read())
    data[-3] ^= 1
    open(prefix + ".pdopt", "wb").write(bytes(data))
    with pytest.raises(ManifestError, match=r"model.pdopt: contents differ"):
        fluid.io.load(main, prefix, exe)
    # a committed group whose renames a kill cut short is completed by the next load
    set_values(main, 8)
    want = values(main)
    fluid.io.save(main, str(tmp_path / "n" / "model"))
    pending = tmp_path / ".model.fluidity-files-new"
    os.rename(tmp_path / "n", pending)
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.load(main, prefix, exe)
        assert same_values(values(main), want)
    assert sorted(os.listdir(tmp_path)) == ["__fluidity_manifest__.json", "model.pdmodel",
                                            "model.pdopt", "model.pdparams"]

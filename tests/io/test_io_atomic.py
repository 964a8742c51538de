"""Whole-save atomicity and manifests, as a user meets them: files a save does not write
survive it, two kinds of save share a directory, an interrupted save is settled by the next
save or load, a changed file is named on load, Paddle's directories load unchecked."""
import json
import os

import pytest

import fluidity as fluid
from fluidity.errors import FluidityError, FormatError
from fluidity.io import ManifestError
from fluidity.io import atomic, manifest
from io_models import hidden_entries, picture, same_values, set_values, values



def _reloaded(exe, startup, main, load):
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        load()
        return values(main)


def test_files_the_save_does_not_write_survive(model, tmp_path):
    exe, main, startup, y = model
    d = tmp_path / "m"
    d.mkdir()
    (d / "README").write_text("mine")
    (d / "sub").mkdir()
    (d / "sub" / "notes").write_text("also mine")
    (d / ".w1.0123456789ab.tmp").write_bytes(b"half a file")  # a killed writer's temp file
    fluid.io.save_inference_model(str(d), ["x"], [y], exe, main)   # __model__ + params
    set_values(main, 5)
    fluid.io.save_persistables(exe, str(d), main, filename="state")  # then all state
    want = values(main)
    names = set(os.listdir(d))
    assert {"README", "sub", "__model__", "w1", "b2", "state", manifest.MANIFEST} <= names
    assert (d / "sub" / "notes").read_text() == "also mine"
    listed = json.loads((d / manifest.MANIFEST).read_text())["files"]
    assert {"__model__", "w1", "state"} <= set(listed) and "README" not in listed
    got = _reloaded(exe, startup, main,
                    lambda: fluid.io.load_persistables(exe, str(d), main, filename="state"))
    assert same_values(got, want)
    fluid.io.load_inference_model(str(d), exe)  # its files kept, and still verified
    os.chmod(d, 0o751)
    fluid.io.save_params(exe, str(d), main)
    assert os.stat(d).st_mode & 0o777 == 0o751           # the directory keeps its mode
    fluid.io.save_params(exe, str(tmp_path / "fresh"), main)
    umask = os.umask(0o22)
    os.umask(umask)
    assert os.stat(tmp_path / "fresh").st_mode & 0o777 == 0o777 & ~umask
    assert hidden_entries(str(d)) == [] and sorted(os.listdir(tmp_path)) == ["fresh", "m"]


def test_changed_file_is_named_on_load(model, tmp_path):
    exe, main, startup, y = model
    fluid.io.save_params(exe, str(tmp_path / "p"), main)
    fluid.io.save_params(exe, str(tmp_path / "c"), main, filename="params")
    f = tmp_path / "p" / "w1"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x40                       # one flipped bit in the last value: still parses
    f.write_bytes(bytes(data))
    with pytest.raises(ManifestError, match=r"p/w1: contents differ from what the save wrote"):
        fluid.io.load_params(exe, str(tmp_path / "p"), main)
    c = tmp_path / "c" / "params"
    c.write_bytes(c.read_bytes()[:-4])
    with pytest.raises(ValueError, match=r"c/params: \d+ bytes, but the save wrote \d+"):
        fluid.io.load_params(exe, str(tmp_path / "c"), main, filename="params")
    assert issubclass(ManifestError, FormatError)
    (tmp_path / "c" / manifest.MANIFEST).write_text("{not json")
    with pytest.raises(ManifestError, match=r"c/__fluidity_manifest__.json: not a readable"):
        fluid.io.load_params(exe, str(tmp_path / "c"), main, filename="params")


def test_directories_without_manifest_load_as_before(model, tmp_path):
    exe, main, startup, y = model
    set_values(main, 3)
    want = values(main)
    fluid.io.save_persistables(exe, str(tmp_path), main)
    (tmp_path / manifest.MANIFEST).unlink()          # as Paddle writes it
    got = _reloaded(exe, startup, main,
                    lambda: fluid.io.load_persistables(exe, str(tmp_path), main))
    assert same_values(got, want)


def _leftover(parent, target, kind):
    return os.path.join(parent, f".{target}.fluidity-{kind}")


def test_next_save_or_load_settles_what_a_kill_left(model, tmp_path):
    exe, main, startup, y = model
    d = str(tmp_path / "m")
    set_values(main, 1)
    fluid.io.save_persistables(exe, d, main)
    old = picture(d)
    # a committed save killed between its two renames: old in -old, new in -new, no m
    set_values(main, 2)
    fluid.io.save_persistables(exe, str(tmp_path / "n"), main)
    new = picture(str(tmp_path / "n"))
    os.rename(d, _leftover(str(tmp_path), "m", "old"))
    os.rename(str(tmp_path / "n"), _leftover(str(tmp_path), "m", "new"))
    # and an uncommitted staging dir of a process that is gone
    os.makedirs(os.path.join(str(tmp_path), ".m.fluidity-staging-999999999-abc"))
    got = _reloaded(exe, startup, main, lambda: fluid.io.load_persistables(exe, d, main))
    assert picture(d) == new and same_values(got, values(main))
    assert sorted(os.listdir(tmp_path)) == ["m"]
    # committed but not yet swapped (m still old): the load puts the new one in place
    fluid.io.save_persistables(exe, str(tmp_path / "n"), main)
    set_values(main, 1)
    fluid.io.save_persistables(exe, d, main)
    assert picture(d) == old
    os.rename(str(tmp_path / "n"), _leftover(str(tmp_path), "m", "new"))
    atomic.settle(str(tmp_path), "m")
    assert picture(d) == new and sorted(os.listdir(tmp_path)) == ["m"]


def test_failed_save_keeps_the_old_one_and_names_the_target(model, tmp_path):
    exe, main, startup, y = model
    d = tmp_path / "m"
    fluid.io.save_persistables(exe, str(d), main)
    before = picture(str(d))
    set_values(main, 4)
    fluid.global_scope().find_var("b2").value = None   # b2 holds nothing now: w1 etc. are
    # written into the staging dir, then the save fails
    with pytest.raises(FluidityError, match=rf"cannot save variable 'b2' to {d}/b2:"):
        fluid.io.save_persistables(exe, str(d), main)
    assert picture(str(d)) == before and sorted(os.listdir(tmp_path)) == ["m"]


def test_save_through_a_symlink_and_from_inside(model, tmp_path, monkeypatch):
    exe, main, startup, y = model
    real = tmp_path / "real"
    fluid.io.save_params(exe, str(real), main)
    os.symlink(real, tmp_path / "link")
    set_values(main, 9)
    fluid.io.save_params(exe, str(tmp_path / "link"), main)
    assert os.path.islink(tmp_path / "link")
    assert picture(str(real)) == picture(str(tmp_path / "link"))
    monkeypatch.chdir(real)                 # the working directory is the saved one
    fluid.io.save_params(exe, ".", main)
    assert os.path.samefile(os.getcwd(), real) and "w1" in os.listdir(".")


def test_a_file_where_the_directory_should_be(model, tmp_path):
    exe, main, startup, y = model
    (tmp_path / "f").write_text("x")
    with pytest.raises(FluidityError, match=r"f: is a file, not a directory"):
        fluid.io.save_params(exe, str(tmp_path / "f"), main)
    assert (tmp_path / "f").read_text() == "x"


def test_prefix_saves_are_one_group_with_the_directory_manifest(model, tmp_path):
    exe, main, startup, y = model
    (tmp_path / "other.txt").write_text("kept")
    x = main.global_block().var("x")
    fluid.io.save_inference_model(str(tmp_path / "model"), [x], [y], exe, main)
    names = sorted(os.listdir(tmp_path))
    assert names == [manifest.MANIFEST, "model.pdiparams", "model.pdmodel", "other.txt"]
    p = tmp_path / "model.pdiparams"
    p.write_bytes(p.read_bytes()[:-1] + b"\x00")
    with pytest.raises(ManifestError, match=r"model.pdiparams: contents differ"):
        fluid.io.load_inference_model(str(tmp_path / "model"), exe)

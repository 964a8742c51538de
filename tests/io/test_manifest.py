"""The manifest reader treats the manifest as a hostile file: a FIFO, a device, a directory
or a symbolic link in its place is refused at once (never waited on, never read forever), a
file larger than any save writes is refused unread, its JSON is parsed within a nesting
limit with the type of every field checked, and a manifest listing no file is an error,
not "no check". Each is a ManifestError naming the manifest and what is wrong."""
import json
import os
import threading

import pytest

import fluidity as fluid
from fluidity.errors import FormatError
from fluidity.io import ManifestError, manifest

SHA = "0" * 64


def _doc(files=None, **top):
    doc = {"format": manifest.FORMAT, "version": manifest.VERSION, "algorithm": "sha256",
           "files": {"w": {"size": 4, "sha256": SHA}} if files is None else files}
    doc.update(top)
    return doc


def _write(d, doc):
    path = d / manifest.MANIFEST
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return str(path)


def _refused_now(d, match):
    """manifest.read(d) raises ManifestError matching `match`, and returns at once (run in
    a thread: a read that blocks fails the test instead of hanging it)."""
    out = []

    def read():
        try:
            manifest.read(str(d))
            out.append(None)
        except Exception as e:  # noqa: BLE001 - judged below
            out.append(e)
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(20)
    assert out, "manifest.read blocked"
    assert isinstance(out[0], ManifestError), out[0]
    assert isinstance(out[0], FormatError)
    assert str(d / manifest.MANIFEST) in str(out[0]) and match in str(out[0]), str(out[0])


def test_a_good_manifest_reads_back(tmp_path):
    _write(tmp_path, _doc())
    assert manifest.read(str(tmp_path)) == {"w": {"size": 4, "sha256": SHA}}
    assert manifest.read(str(tmp_path / "nowhere")) is None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_in_place_of_the_manifest_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / manifest.MANIFEST)         # nobody writes it: open() would wait
    _refused_now(tmp_path, "is a FIFO, not a regular file")


def test_a_directory_in_place_of_the_manifest_is_refused(tmp_path):
    (tmp_path / manifest.MANIFEST).mkdir()
    _refused_now(tmp_path, "is a directory, not a regular file")


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "dir", "good"])
def test_a_symbolic_link_in_place_of_the_manifest_is_refused(tmp_path, target):
    if target == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(tmp_path / "fifo")
    elif target == "dir":
        (tmp_path / "dir").mkdir()
    elif target == "good":            # even to a real manifest: a save writes a file there
        (tmp_path / "good").write_text(json.dumps(_doc()))
    elif not os.path.exists(target):
        pytest.skip(f"no {target} here")
    dest = target if os.path.isabs(target) else str(tmp_path / target)
    os.symlink(dest, tmp_path / manifest.MANIFEST)
    _refused_now(tmp_path, "is a symbolic link")


def test_a_device_in_place_of_the_manifest_is_refused(tmp_path, monkeypatch):
    # /dev/zero itself, as a directory's manifest (its name is what the reader opens)
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    monkeypatch.setattr(manifest, "MANIFEST", "zero")
    _refused_now(type(tmp_path)("/dev"), "is a character device, not a regular file")


def test_a_manifest_larger_than_any_save_writes_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(manifest, "MAX_BYTES", 4096)
    _write(tmp_path, b" " * 4097)
    _refused_now(tmp_path, "4097 bytes, more than any save writes (4096)")


BAD = {
    "a string entry": (_doc({"w": "abc"}), "the entry of 'w' is a str"),
    "a list entry": (_doc({"w": [4, SHA]}), "the entry of 'w' is a list"),
    "a string version": (_doc(version="1"), "'version' is '1'"),
    "a float version": (_doc(version=1.0), "'version' is 1.0"),
    "a bool version": (_doc(version=True), "'version' is True"),
    "version zero": (_doc(version=0), "not a positive integer"),
    "no version": ({k: v for k, v in _doc().items() if k != "version"}, "'version' is None"),
    "files a list": (_doc([]), "'files' is a list"),
    "no files": (_doc({}), "'files' lists no file"),
    "a string size": (_doc({"w": {"size": "4", "sha256": SHA}}), "the size of 'w' is '4'"),
    "a negative size": (_doc({"w": {"size": -1, "sha256": SHA}}), "the size of 'w' is -1"),
    "a bool size": (_doc({"w": {"size": True, "sha256": SHA}}), "the size of 'w' is True"),
    "a short checksum": (_doc({"w": {"size": 4, "sha256": "abc"}}), "not 64 lowercase hex"),
    "a numeric checksum": (_doc({"w": {"size": 4, "sha256": 7}}), "the sha256 of 'w' is 7"),
    "a path climbing out": (_doc({"../w": {"size": 4, "sha256": SHA}}), "not a path inside"),
    "an absolute path": (_doc({"/etc/passwd": {"size": 4, "sha256": SHA}}),
                         "not a path inside"),
    "another format": (_doc(format="zip"), "'format' is 'zip'"),
    "another algorithm": (_doc(algorithm="md5"), "'algorithm' is 'md5'"),
    "a JSON list": ([1, 2], "a JSON list, not an object"),
    "deep nesting": (b"[" * 100000 + b"]" * 100000, "nests 100000 levels deep"),
    "nesting in an entry": (_doc({"w": {"size": {"n": [4]}, "sha256": SHA}}),
                            "nests 5 levels deep (at most 3)"),
    "not JSON": (b"{not json", "is not JSON"),
    "not UTF-8": (b'{"format": "\xff"}', "is not JSON"),
}


@pytest.mark.parametrize("what", sorted(BAD))
def test_every_field_is_checked(tmp_path, what):
    doc, match = BAD[what]
    _write(tmp_path, doc)
    _refused_now(tmp_path, match)


def test_a_newer_manifest_version_is_named(tmp_path):
    _write(tmp_path, _doc(version=manifest.VERSION + 1))
    _refused_now(tmp_path, f"manifest version {manifest.VERSION + 1} is newer")


def test_an_empty_file_list_fails_the_load_instead_of_turning_the_check_off(model, tmp_path):
    exe, main, startup, _y = model
    fluid.io.save_params(exe, str(tmp_path), main)
    data = bytearray((tmp_path / "w1").read_bytes())
    data[-1] ^= 0x40
    (tmp_path / "w1").write_bytes(bytes(data))          # a corrupted parameter
    (tmp_path / manifest.MANIFEST).write_text(json.dumps(_doc({})))
    with pytest.raises(ManifestError, match="lists no file"):
        fluid.io.load_params(exe, str(tmp_path), main)
    # deleting the manifest is how a user loads a directory unchecked
    (tmp_path / manifest.MANIFEST).unlink()
    fluid.io.load_params(exe, str(tmp_path), main)


def test_a_save_of_no_files_leaves_no_manifest(tmp_path):
    manifest.write(str(tmp_path), {})
    assert not (tmp_path / manifest.MANIFEST).exists()
    manifest.write(str(tmp_path), {"w": {"size": 4, "sha256": SHA}})
    manifest.write(str(tmp_path), {})                   # an old one goes
    assert not (tmp_path / manifest.MANIFEST).exists()
    manifest.verify(str(tmp_path), ["w"])               # no manifest: unchecked, as before

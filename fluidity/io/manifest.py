"""The manifest of a save: ``__fluidity_manifest__.json`` beside Paddle's files, mapping each
file the save wrote (path relative to the directory, '/'-separated) to its size and sha256.

Paddle's formats carry no checksum, so a flipped byte in a parameter file loads silently
with a different value; the manifest lets a load tell. Paddle ignores the file (it reads
only the files it names), and directories without one (Paddle's own saves) load as before.
It is written last inside the staged save (fluidity.io.atomic), so it always describes the
files it was committed with. Deterministic content (no times), so two equal saves are
byte-identical.
"""
import hashlib
import json
import os

from ..core import serialization as ser
from ..errors import FormatError

MANIFEST = "__fluidity_manifest__.json"


class ManifestError(FormatError, ValueError):
    """A saved file whose size or checksum differs from what the save's manifest recorded
    (the file was changed or corrupted after the save), or a manifest that cannot be read."""


FORMAT = "fluidity-manifest"
VERSION = 1
_BLOCK = 1 << 20


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(_BLOCK)
            if not b:
                return h.hexdigest()
            h.update(b)


def entry(path):
    """{"size", "sha256"} of the file at `path`."""
    return {"size": os.path.getsize(path), "sha256": _sha256(path)}


def _key(rel):
    return rel.replace(os.sep, "/")


def entries_for(directory, rels):
    """{relative path: entry} of the files `rels` under `directory`."""
    return {_key(rel): entry(os.path.join(directory, rel)) for rel in rels}


def write(directory, entries):
    text = json.dumps({"format": FORMAT, "version": VERSION, "algorithm": "sha256",
                       "files": dict(sorted(entries.items()))}, indent=1, sort_keys=True)
    ser.atomic_write(os.path.join(directory, MANIFEST), lambda f: f.write(text.encode()))


def read(directory):
    """The {relative path: entry} of `directory`'s manifest, or None when it has none.
    A manifest that is not one raises ManifestError naming it."""
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ManifestError(f"{path}: cannot read the manifest: {e.strerror or e}") from None
    try:
        doc = json.loads(data)
        ok = (isinstance(doc, dict) and doc.get("format") == FORMAT
              and doc.get("algorithm") == "sha256" and isinstance(doc.get("files"), dict))
    except (ValueError, UnicodeDecodeError):
        ok = False
    if not ok:
        raise ManifestError(f"{path}: not a readable fluidity manifest (corrupt?); delete it "
                            f"to load the directory unchecked")
    if doc.get("version", 0) > VERSION:
        raise ManifestError(f"{path}: manifest version {doc['version']} is newer than this "
                            f"fluidity reads ({VERSION})")
    return doc["files"]


def verify(directory, rels):
    """Check the files `rels` (relative to `directory`) that the manifest lists: a size or
    checksum that differs raises ManifestError naming the file. Files it does not list, and
    directories without a manifest, pass unchecked."""
    entries = read(directory)
    if not entries:
        return
    for rel in rels:
        want = entries.get(_key(rel))
        if want is None:
            continue
        path = os.path.join(directory, rel)
        try:
            size = os.path.getsize(path)
        except OSError:
            continue  # the load itself says the file is missing
        if size != want.get("size"):
            raise ManifestError(f"{path}: {size} bytes, but the save wrote {want.get('size')} "
                                f"({MANIFEST}): the file was changed or truncated after the "
                                f"save")
        if _sha256(path) != want.get("sha256"):
            raise ManifestError(f"{path}: contents differ from what the save wrote (sha256 "
                                f"mismatch against {MANIFEST}): the file is corrupted or was "
                                f"changed after the save")

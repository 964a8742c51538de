"""The manifest of a save: ``__fluidity_manifest__.json`` beside Paddle's files, mapping each
file the save wrote (path relative to the directory, '/'-separated) to its size and sha256.

Paddle's formats carry no checksum, so a flipped byte in a parameter file loads silently
with a different value; the manifest lets a load tell. Paddle ignores the file (it reads
only the files it names), and directories without one (Paddle's own saves) load as before.
It is written last inside the staged save (fluidity.io.atomic), so it always describes the
files it was committed with. Deterministic content (no times), so two equal saves are
byte-identical.

The manifest itself is read as a hostile file: it is opened without following a symbolic
link and without blocking (`O_NOFOLLOW | O_NONBLOCK`), and only a regular file of at most
`MAX_BYTES` is read (a FIFO, a device such as /dev/zero, a directory or a link is refused at
once, never waited on or read forever); its JSON is parsed within a nesting limit and every
field's type is checked (`_validate`); a manifest that lists no file is an error, not "no
check". Each fault is a `ManifestError` (a `FormatError`) naming the manifest.
"""
import hashlib
import json
import os
import re
import stat

from ..core import bounded_json
from ..core import serialization as ser
from ..errors import FormatError

MANIFEST = "__fluidity_manifest__.json"


class ManifestError(FormatError, ValueError):
    """A saved file whose size or checksum differs from what the save's manifest recorded
    (the file was changed or corrupted after the save), or a manifest that cannot be read."""


FORMAT = "fluidity-manifest"
VERSION = 1
MAX_BYTES = 64 << 20        # ~500,000 files' entries
MAX_DEPTH = 3               # {"files": {path: {"size", "sha256"}}}
_BLOCK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")


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
    """Write `directory`'s manifest of `entries` ({relative path: entry}); with no entries
    there is nothing to check, so no manifest is left (an old one is removed)."""
    if not entries:
        try:
            os.unlink(os.path.join(directory, MANIFEST))
        except FileNotFoundError:
            pass
        return
    text = json.dumps({"format": FORMAT, "version": VERSION, "algorithm": "sha256",
                       "files": dict(sorted(entries.items()))}, indent=1, sort_keys=True)
    ser.atomic_write(os.path.join(directory, MANIFEST), lambda f: f.write(text.encode()))


def _read_bytes(path):
    """The bytes of the manifest file at `path`; None when there is none. Only a regular
    file of at most MAX_BYTES is read (opened without following a link or blocking)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as e:
        if os.path.islink(path):
            raise ManifestError(f"{path}: the manifest is a symbolic link; a save writes a "
                                f"regular file there") from None
        raise ManifestError(f"{path}: cannot read the manifest: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ManifestError(f"{path}: the manifest is {_kind(st.st_mode)}, not a regular "
                                f"file")
        if st.st_size > MAX_BYTES:
            raise ManifestError(f"{path}: the manifest is {st.st_size} bytes, more than any "
                                f"save writes ({MAX_BYTES})")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise ManifestError(f"{path}: the manifest grew past {MAX_BYTES} bytes while read")
        return data
    except OSError as e:
        raise ManifestError(f"{path}: cannot read the manifest: {e.strerror or e}") from None
    finally:
        os.close(fd)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode):
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _validate(doc):
    """The problem with a parsed manifest `doc`, or None when every field has its type."""
    if not isinstance(doc, dict):
        return f"it is a JSON {type(doc).__name__}, not an object"
    if doc.get("format") != FORMAT:
        return f"'format' is {doc.get('format')!r:.60}, not {FORMAT!r}"
    if doc.get("algorithm") != "sha256":
        return f"'algorithm' is {doc.get('algorithm')!r:.60}, not 'sha256'"
    if not _is_int(doc.get("version")) or doc["version"] < 1:
        return f"'version' is {doc.get('version')!r:.60}, not a positive integer"
    files = doc.get("files")
    if not isinstance(files, dict):
        return f"'files' is a {type(files).__name__}, not an object"
    if not files:
        return "'files' lists no file (a save lists every file it wrote)"
    for rel, ent in files.items():
        parts = rel.split("/")
        if not rel or rel.startswith("/") or ".." in parts or "\0" in rel:
            return f"file name {rel!r:.80} is not a path inside the directory"
        if not isinstance(ent, dict):
            return f"the entry of {rel!r:.80} is a {type(ent).__name__}, not an object"
        if not _is_int(ent.get("size")) or ent["size"] < 0:
            return f"the size of {rel!r:.80} is {ent.get('size')!r:.40}, not a byte count"
        if not isinstance(ent.get("sha256"), str) or not _SHA256.fullmatch(ent["sha256"]):
            return (f"the sha256 of {rel!r:.80} is {ent.get('sha256')!r:.80}, not 64 "
                    f"lowercase hex digits")
    return None


def read(directory):
    """The {relative path: entry} of `directory`'s manifest, or None when it has none.
    A manifest that is not one raises ManifestError naming it."""
    path = os.path.join(directory, MANIFEST)
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        doc = bounded_json.loads(data, MAX_BYTES, MAX_DEPTH, "the manifest")
    except FormatError as e:
        raise ManifestError(f"{path}: not a readable fluidity manifest ({e}); delete it to "
                            f"load the directory unchecked") from None
    if isinstance(doc, dict) and _is_int(doc.get("version")) and doc["version"] > VERSION \
            and doc.get("format") == FORMAT:
        raise ManifestError(f"{path}: manifest version {doc['version']} is newer than this "
                            f"fluidity reads ({VERSION})")
    problem = _validate(doc)
    if problem is not None:
        raise ManifestError(f"{path}: not a readable fluidity manifest ({problem}); delete "
                            f"it to load the directory unchecked")
    return doc["files"]


def verify(directory, rels):
    """Check the files `rels` (relative to `directory`) that the manifest lists: a size or
    checksum that differs raises ManifestError naming the file. Files it does not list, and
    directories without a manifest, pass unchecked."""
    entries = read(directory)
    if entries is None:
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

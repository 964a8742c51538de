"""A parameter server's checkpoints: what it holds, saved atomically, and the round log that
lets a restarted server redo every round it had applied since.

A **snapshot** is a directory, committed as one staged save (`fluidity.io.atomic`: it
appears complete, with a manifest of sizes and checksums, or not at all):

    <dir>/<variable name>          each persistable variable, Paddle's tensor record
                                   (LoDTensor or SelectedRows, by the value's type)
    <dir>/__pserver__.json         {"version": applied rounds, "endpoint", "variables":
                                   {name: "lod_tensor" | "selected_rows"}}

It holds every persistable variable the pserver program declares that has a value in the
scope (parameters, optimizer accumulators, learning-rate counters, sparse table shards).

The **round log** (`rounds.log` beside the snapshot in the recovery directory) records, for
each sync round applied after the snapshot, the values its optimize blocks read (the
trainers' gradients), then a commit record; it is appended before the blocks run. A restarted
server loads the snapshot and re-runs the logged rounds (same inputs, same ops: the same
parameters, bit for bit), so no applied round is lost. A round whose commit record did not
reach the file (the server died while writing it) was never applied: its trainers resend it.
Each record: u64 little-endian length | a `wire` message.

A **notified** checkpoint (`CheckpointNotify`, asked by a trainer) goes where the request
says, but only inside the server's checkpoint root: `notify_target` resolves the request's
relative path there and refuses (`wire.BadRequest`, INVALID_ARGUMENT) an absolute path, a
`..`, a hidden name (`.x`: the atomic save's staging names), a symbolic link on the way, a
file, this server's recovery directory, and an existing directory that holds anything but
a checkpoint of this same server (an empty one is used)."""
import json
import os
import stat
import struct

from ..core import serialization as ser
from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import FluidityError, FormatError
from ..io import atomic, manifest
from . import wire

STATE_FILE = "__pserver__.json"
SNAPSHOT = "snapshot"
ROUND_LOG = "rounds.log"
_LEN = struct.Struct("<Q")
_SKIP_TYPES = (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.RAW, VarType.READER)
_WRITERS = {LoDTensor: ("lod_tensor", ser.write_lod_tensor),
            SelectedRows: ("selected_rows", ser.write_selected_rows)}
_READERS = {"lod_tensor": ser.read_lod_tensor, "selected_rows": ser.read_selected_rows}


class CheckpointError(FluidityError):
    """A pserver checkpoint that cannot be written or read; the message names the path."""


def persistable_names(program):
    """Names of the persistable variables declared in any block of `program` (a view)."""
    out = {}
    for v in program.list_vars():
        if v.persistable and v.type not in _SKIP_TYPES:
            out.setdefault(v.name, None)
    return list(out)


def _checked_name(name):
    if not name or name.startswith(".") or "/" in name or os.sep in name or name == STATE_FILE:
        raise CheckpointError(f"variable name {name!r} cannot name a checkpoint file")
    return name


MAX_NOTIFY_PATH = 4096


def notify_target(root, directory, endpoint, recovery=None):
    """The absolute path, inside `root`, of the checkpoint a CheckpointNotify naming
    `directory` writes; its missing parent directories are created. Raises BadRequest for a
    path that leaves the root or names something else (see the module's docstring)."""
    def refuse(why):
        raise wire.BadRequest(f"checkpoint_notify: directory {directory!r:.200} {why}; it "
                              f"must be a new or an empty directory, or a checkpoint of this "
                              f"pserver, relative to its checkpoint root {root} "
                              f"(FLAGS_pserver_checkpoint_notify_root)")
    if not directory:
        refuse("is empty")
    if len(directory.encode("utf-8", "surrogatepass")) > MAX_NOTIFY_PATH or any(
            ord(c) < 32 or c == "\x7f" for c in directory):
        refuse("is too long or holds control characters")
    if os.path.isabs(directory) or directory.startswith("~"):
        refuse("is an absolute path")
    parts = [p for p in directory.split("/") if p not in ("", ".")]
    if ".." in parts:
        refuse("climbs out with '..'")
    if any(p.startswith(".") for p in parts):
        refuse("has a hidden name (a leading '.': atomic saves stage under such names)")
    if not parts:
        refuse("names the checkpoint root itself")
    if any(len(p.encode("utf-8", "surrogatepass")) > 255 for p in parts):
        refuse("is too long (a name of more than 255 bytes)")
    os.makedirs(root, exist_ok=True)
    path = root
    for i, part in enumerate(parts):
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if i == len(parts) - 1:
                continue
            try:
                os.mkdir(path)
                continue
            except FileExistsError:     # another pserver of the job made it just now:
                st = os.lstat(path)     # checked as any existing one
        if stat.S_ISLNK(st.st_mode):
            refuse(f"passes through the symbolic link {path}")
        if not stat.S_ISDIR(st.st_mode):
            refuse(f"passes through {path}, which is not a directory")
    if recovery is not None:
        rec = os.path.realpath(recovery)
        if path == rec or path.startswith(rec + os.sep) or rec.startswith(path + os.sep):
            refuse("is or holds this pserver's recovery directory")
    if os.path.isdir(path) and os.listdir(path):
        saved_by = _saved_by(path)
        if saved_by != endpoint:
            refuse("exists and holds something else" if saved_by is None else
                   f"holds the checkpoint of pserver {saved_by}, not of this one ({endpoint})")
    return path


def _saved_by(directory):
    """The endpoint a pserver checkpoint in `directory` was saved by, or None when the
    directory is not one."""
    path = os.path.join(directory, STATE_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > (1 << 20):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            state = json.loads(f.read())
        endpoint = state.get("endpoint") if isinstance(state, dict) else None
        return endpoint if isinstance(endpoint, str) else None
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)


def save(directory, scope, names, version, endpoint):
    """Save the values in `scope` of `names` (those that hold a LoDTensor or SelectedRows)
    and the pserver's `version` as a snapshot in `directory`, atomically. Returns the
    names saved."""
    kinds = {}
    with atomic.StagedDirectory(directory) as stage:
        for name in names:
            var = scope.find_var(name)
            value = None if var is None else var.value
            kind = _writer(value)
            if kind is None or (isinstance(value, LoDTensor) and value._array is None):
                continue
            kinds[name] = kind[0]
            ser.atomic_write(os.path.join(stage.path, _checked_name(name)),
                             lambda f, w=kind[1], v=value: w(f, v))
        state = {"version": int(version), "endpoint": endpoint, "variables": kinds}
        text = json.dumps(state, indent=1, sort_keys=True).encode()
        ser.atomic_write(os.path.join(stage.path, STATE_FILE), lambda f: f.write(text))
    return list(kinds)


def _writer(value):
    """(kind, write function) of a scope value, by its class or a base class (a
    distributed table's SparseTable is a SelectedRows); None for what is not saved."""
    for cls in type(value).__mro__:
        if cls in _WRITERS:
            return _WRITERS[cls]
    return None


def exists(directory):
    return os.path.isfile(os.path.join(directory, STATE_FILE)) or any(
        n.startswith(f".{os.path.basename(directory)}.fluidity-new")
        for n in _listdir(os.path.dirname(os.path.abspath(directory))))


def _listdir(d):
    try:
        return os.listdir(d)
    except OSError:
        return []


def load(directory, scope):
    """Put a snapshot's variables into `scope` (each where the scope already holds it, else
    in its root); returns its state dict (version, endpoint, variables)."""
    with atomic.reading(directory) as d:
        path = os.path.join(d, STATE_FILE)
        try:
            with open(path, "rb") as f:
                state = json.loads(f.read())
            kinds = dict(state["variables"])
            int(state["version"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{path}: not a pserver checkpoint state: {e}") from None
        manifest.verify(d, [STATE_FILE] + [_checked_name(n) for n in kinds])
        for name, kind in kinds.items():
            reader = _READERS.get(kind)
            if reader is None:
                raise CheckpointError(f"{path}: variable '{name}' has unknown kind {kind!r}")
            file = os.path.join(d, name)
            try:
                with open(file, "rb") as f:
                    value = reader(f)
            except OSError as e:
                raise CheckpointError(f"{file}: cannot read: {e.strerror or e}") from None
            except FormatError as e:
                raise CheckpointError(f"{file}: {e}") from None
            var = scope.find_var(name) or scope.root().var(name)
            var.value = value
    return state


class RoundLog:
    """The append-only log of the sync rounds applied since the recovery snapshot."""

    def __init__(self, path, fsync=False):
        self.path, self.fsync = path, fsync
        self._f = None

    def append(self, round_no, values):
        """Record round `round_no`'s inputs ({name: value}) and its commit, flushed to the
        OS (and fsynced when asked) before the caller applies the round."""
        if self._f is None:
            self._f = open(self.path, "ab")
        parts = [wire.encode({"round": round_no, "name": n}, v) for n, v in values.items()]
        parts.append(wire.encode({"round": round_no, "commit": True}))
        self._f.write(b"".join(_LEN.pack(len(p)) + p for p in parts))
        self._f.flush()
        if self.fsync:
            os.fsync(self._f.fileno())

    def truncate(self):
        """Empty the log (the snapshot just written holds every round in it)."""
        self.close()
        ser.atomic_write(self.path, lambda f: None)

    def close(self):
        if self._f is not None:
            self._f.close()
            self._f = None

    def rounds(self):
        """[(round, {name: value})] of the committed rounds in the log, in order; a torn or
        uncommitted tail (a server killed while appending) is ignored."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        out, pending, pos = [], {}, 0
        while pos + _LEN.size <= len(data):
            (n,) = _LEN.unpack_from(data, pos)
            if pos + _LEN.size + n > len(data):
                break                                   # torn tail
            try:
                header, value = wire.decode(data[pos + _LEN.size:pos + _LEN.size + n])
            except FormatError as e:
                raise CheckpointError(f"{self.path}: corrupt record at byte {pos}: {e}") \
                    from None
            at, pos = pos, pos + _LEN.size + n
            try:
                if header.get("commit"):
                    out.append((wire.field(header, "round", int), pending))
                    pending = {}
                else:
                    pending[wire.field(header, "name")] = value
            except FormatError as e:
                raise CheckpointError(f"{self.path}: corrupt record at byte {at}: {e}") \
                    from None
        return out

"""Whole saves are atomic: a save either fully replaces the previous one or leaves it intact
and loadable, whatever moment the process dies; the next save or load settles what a killed
one left behind.

Directory saves (`save_vars`, `save_params`, `save_persistables` with separate files or one
`filename`, `save_inference_model` into a directory, each checkpoint). The target directory
D, in parent P, is never written in place:

 1. settle D (below);
 2. stage: the save's ops write the new files into a sibling
    ``P/.D.fluidity-staging-<pid>-<random>/``, each file fsynced;
 3. under an exclusive flock on P: every file of D that the save did not write (the user's
    own files, an inference model saved there before, ...) is hard-linked into the staging
    dir (copied where links are impossible), so it survives -- except the temporary files
    of a file write that a kill cut short, which are swept away so; the manifest
    (``__fluidity_manifest__.json``: each new file's size and sha256, plus the entries of D's
    old manifest for the files carried over) is written last; the staging dir is fsynced;
 4. **commit point**: rename the staging dir to ``P/.D.fluidity-new``, fsync P;
 5. rename D to ``P/.D.fluidity-old``, rename ``.D.fluidity-new`` to D, fsync P;
 6. remove ``.D.fluidity-old``.

Settling D (the start of every save and load of D, under the flock):

 * ``.D.fluidity-staging-<pid>-*`` whose process is gone: a save killed before its commit
   point: removed (the old D was never touched);
 * ``.D.fluidity-new``: a committed save not yet in place: steps 5 and 6 are done now;
 * ``.D.fluidity-old`` (without ``-new``): a finished swap or a deletion that was cut
   short: removed.

So after any kill D on disk is the old save, complete, or -- for the instant between the
two renames of step 5 -- absent, while the old save sits complete in ``-old`` and the new one
in ``-new``; the next save or load puts the new one in place. Never a mix of two saves.

File-group saves (Paddle 2.x ``<prefix>.pdmodel`` + ``<prefix>.pdiparams``, ``fluid.io.save``'s
``.pdparams``/``.pdopt``/``.pdmodel``) share their directory with anything, so the directory is
not swapped: the group is staged in ``P/.<prefix>.fluidity-files-staging-<pid>-<random>/``,
committed by renaming that to ``P/.<prefix>.fluidity-files-new``, and then each of its files
(the merged manifest of P last) is renamed into P; settling finishes those renames.

A directory that cannot be swapped (a mount point, or a parent this process may not write)
is saved file by file, each file atomically, with a warning: the only non-atomic case.
Symbolic links to directories are followed (the real directory is swapped; the link stays).
A process whose working directory is inside D is moved into the new D.

Two processes saving the same place at once are serialized at the commit (flock); a staging
directory of a live process is never removed. One process id space is assumed (not several
machines sharing a network file system).
"""
import contextlib
import logging
import os
import re
import shutil
import tempfile
import threading

from ..core import serialization as ser
from ..errors import FluidityError
from . import manifest

logger = logging.getLogger("fluidity")

_LEFTOVER = re.compile(r"^\.(?P<target>.+)\.fluidity-(?P<kind>staging|new|old|files-staging|"
                       r"files-new)(?:-(?P<pid>\d+)-[A-Za-z0-9_]+)?$")
IN_PLACE = "__fluidity_in_place__"   # the staging name of a save made inside its directory
# a temporary file of serialization.atomic_write (".<name>.<12 hex>.tmp") left by a writer
# killed mid-file: never carried into the next save, so that save sweeps it away
_WRITE_TEMP = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")
_active = set()             # staging dirs of this process's saves in progress
_active_lock = threading.Lock()


def _leftover(parent, target, kind):
    return os.path.join(parent, f".{target}.fluidity-{kind}")


def _fsync_tree(top):
    for root, _dirs, _files in os.walk(top, topdown=False):
        ser.fsync_dir(root)


def remove_tree(path):
    """Remove a file or directory tree; what is already gone is no error."""
    if os.path.islink(path) or os.path.isfile(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    shutil.rmtree(path, onerror=_ignore_missing)


def _ignore_missing(func, path, exc_info):
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


_held = threading.local()   # {parent: [mode, fd]} of the locks this thread holds


@contextlib.contextmanager
def _locked(parent, exclusive=True):
    """An flock on directory `parent` (exclusive for commits and settling, shared for
    reading); no lock where the file system cannot give one. Re-entrant per thread: a
    nested request uses the lock the thread holds (a shared one converted to exclusive
    meanwhile), never a second descriptor that would wait on the first."""
    import fcntl
    held = getattr(_held, "locks", None)
    if held is None:
        held = _held.locks = {}
    key = os.path.realpath(parent)
    want = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
    if key in held:
        mode, fd = held[key]
        if mode == fcntl.LOCK_EX or want == mode:
            yield
            return
        _flock(fd, want)                     # shared -> exclusive, and back after
        held[key][0] = want
        try:
            yield
        finally:
            _flock(fd, mode)
            held[key][0] = mode
        return
    try:
        fd = os.open(parent, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        _flock(fd, want)
        held[key] = [want, fd]
        yield
    finally:
        held.pop(key, None)
        os.close(fd)  # releases the lock


def _flock(fd, mode):
    import fcntl
    try:
        fcntl.flock(fd, mode)
    except OSError:
        pass


def _process_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _is_dead_staging(parent, name, pid):
    path = os.path.join(parent, name)
    if pid is None:
        return True
    if pid == os.getpid():
        with _active_lock:
            return path not in _active
    return _process_gone(pid)


def _leftovers(parent, target=None):
    """[(name, target, kind, pid)] of the protocol's entries in `parent` (for `target` only
    when given)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    out = []
    for n in names:
        m = _LEFTOVER.match(n)
        if m and (target is None or m["target"] == target):
            out.append((n, m["target"], m["kind"], int(m["pid"]) if m["pid"] else None))
    return out


def _settle_locked(parent, target=None):
    """Finish or undo what interrupted saves of `target` (every target when None) in
    `parent` left; the caller holds the exclusive lock."""
    found = _leftovers(parent, target)
    if not found:
        return
    changed = False
    for name, tgt, kind, pid in sorted(found, key=lambda x: x[2]):
        path = os.path.join(parent, name)
        if kind in ("staging", "files-staging"):
            if _is_dead_staging(parent, name, pid):
                logger.info("removing %s, left by a save that did not finish", path)
                remove_tree(path)
                changed = True
        elif kind == "new":
            _swap_in(parent, tgt)
            changed = True
        elif kind == "files-new":
            _move_files_in(path, parent)
            changed = True
    for name, tgt, kind, _pid in _leftovers(parent, target):
        if kind == "old":
            remove_tree(os.path.join(parent, name))
            changed = True
    if changed:
        ser.fsync_dir(parent)


def settle(parent, target=None):
    """The public face of settling: `target` in `parent` (or every target there)."""
    if not _leftovers(parent, target):
        return
    with _locked(parent):
        _settle_locked(parent, target)


def _swap_in(parent, target):
    """Steps 5-6: the committed `.target.fluidity-new` replaces `target`."""
    new, old = _leftover(parent, target, "new"), _leftover(parent, target, "old")
    dest = os.path.join(parent, target)
    cwd = _cwd_inside(dest)
    if os.path.lexists(dest):
        if os.path.lexists(old):
            remove_tree(old)
        os.rename(dest, old)
    os.rename(new, dest)
    ser.fsync_dir(parent)
    if cwd is not None:
        _return_to(dest, cwd)
    remove_tree(old)


def _cwd_inside(d):
    """The working directory relative to `d` when it lies inside `d`, else None."""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:
        return None
    d = os.path.realpath(d)
    if cwd == d:
        return "."
    if cwd.startswith(d + os.sep):
        return os.path.relpath(cwd, d)
    return None


def _return_to(d, rel):
    target = os.path.join(d, rel)
    os.chdir(target if os.path.isdir(target) else d)


def _move_files_in(src, parent):
    """Rename every file of the committed group dir `src` into `parent` (the manifest last),
    then remove `src`."""
    names = sorted(os.listdir(src), key=lambda n: n == manifest.MANIFEST)
    for n in names:
        os.replace(os.path.join(src, n), os.path.join(parent, n))
    ser.fsync_dir(parent)
    remove_tree(src)


def _files_under(top):
    """Relative paths of the files (and symlinks) below `top`."""
    out = []
    for root, dirs, files in os.walk(top):
        for n in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            out.append(os.path.relpath(os.path.join(root, n), top))
    return out


def _carry(src, dst, written):
    """Hard-link (or copy) each file of `src` that the save did not write into `dst`;
    returns their relative paths."""
    carried = []
    for rel in _files_under(src):
        if rel in written or rel == manifest.MANIFEST or \
                _WRITE_TEMP.match(os.path.basename(rel)):
            continue
        a, b = os.path.join(src, rel), os.path.join(dst, rel)
        if os.path.lexists(b):
            continue
        os.makedirs(os.path.dirname(b), exist_ok=True)
        if os.path.islink(a):
            os.symlink(os.readlink(a), b)
        else:
            try:
                os.link(a, b)
            except OSError:
                shutil.copy2(a, b)
        carried.append(rel)
    return carried


def _new_staging(parent, target, kind, like=None):
    """A fresh staging dir in `parent`, with the permissions of directory `like` when that
    exists, else those a new directory gets (mkdtemp's own 0700 would lock others out of
    the save once it is swapped in)."""
    os.makedirs(parent, exist_ok=True)
    path = tempfile.mkdtemp(prefix=f".{target}.fluidity-{kind}-{os.getpid()}-", dir=parent)
    with _active_lock:
        _active.add(path)
    try:
        mode = os.stat(like).st_mode & 0o7777 if like and os.path.isdir(like) else \
            0o777 & ~_umask()
        os.chmod(path, mode)
    except OSError:
        pass
    return path


def _umask():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def _drop_staging(path, remove):
    with _active_lock:
        _active.discard(path)
    if remove:
        remove_tree(path)


def _merged_manifest(staging, written, old_dir, carried=None):
    """Entries for the new files, plus the old manifest's entries of the carried ones (by
    default every old entry not written anew)."""
    entries = manifest.entries_for(staging, written)
    old = manifest.read(old_dir) or {}
    if carried is None:
        carried = [rel for rel in old if rel not in written]
    entries.update({rel: old[rel] for rel in carried if rel in old})
    return entries


def _name_the_target(exc, staging, target):
    """An error of a staged write names the file where the user asked for it, not the
    staging directory's copy."""
    if isinstance(exc, FluidityError) and exc.args and isinstance(exc.args[0], str):
        exc.args = (exc.args[0].replace(staging, target),) + exc.args[1:]


class _Staged:
    """A save staged in `self.path`: `__exit__` commits it (`_commit`) when the block ended
    well, else discards it; errors name `self.where` (what the user asked to save), never the
    staging copy."""

    def _cannot(self, e):
        return FluidityError(f"{self.where}: cannot save here: {e.strerror or e}")

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            _drop_staging(self.path, remove=True)
            _name_the_target(exc, self.path, self.home)
            return False
        try:
            self._commit()
        except OSError as e:
            _drop_staging(self.path, remove=True)
            raise self._cannot(e) from None
        return False


class StagedDirectory(_Staged):
    """`with StagedDirectory(dirname) as stage:` write the save's files under `stage.path`;
    leaving the block without an exception commits them as the new contents of `dirname`
    (the files already there that the save did not write kept), with an exception discards
    them and leaves `dirname` as it was."""

    def __init__(self, dirname):
        self.where = os.fspath(dirname)
        self.home = self.target = os.path.realpath(os.path.abspath(self.where))
        self.parent, self.name = os.path.split(self.target)
        self.in_place = False

    def __enter__(self):
        if os.path.exists(self.target) and not os.path.isdir(self.target):
            raise FluidityError(f"{self.where}: is a file, not a directory to save into")
        try:
            os.makedirs(self.parent, exist_ok=True)
            settle(self.parent, self.name)
            if self._swappable():
                self.path = _new_staging(self.parent, self.name, "staging", like=self.target)
            else:
                self._stage_in_place()
        except OSError as e:
            raise self._cannot(e) from None
        return self

    def _swappable(self):
        if not self.name or not os.access(self.parent, os.W_OK | os.X_OK):
            return False
        return not (os.path.isdir(self.target) and os.path.ismount(self.target))

    def _stage_in_place(self):
        logger.warning("%s: a mount point or in a directory this process cannot write: "
                       "saving file by file (each file atomic, the save as a whole not)",
                       self.where)
        self.in_place = True
        os.makedirs(self.target, exist_ok=True)
        settle(self.target, IN_PLACE)
        self.path = _new_staging(self.target, IN_PLACE, "staging")

    def _commit(self):
        written = set(_files_under(self.path))
        if self.in_place:
            return self._commit_in_place(written)
        with _locked(self.parent):
            _settle_locked(self.parent, self.name)
            carried = _carry(self.target, self.path, written) \
                if os.path.isdir(self.target) else []
            manifest.write(self.path, _merged_manifest(self.path, written, self.target,
                                                       carried))
            _fsync_tree(self.path)
            new = _leftover(self.parent, self.name, "new")
            os.rename(self.path, new)                       # the commit point
            _drop_staging(self.path, remove=False)
            ser.fsync_dir(self.parent)
            _swap_in(self.parent, self.name)

    def _commit_in_place(self, written):
        with _locked(self.target):
            entries = _merged_manifest(self.path, written, self.target)
            for rel in sorted(written):
                dst = os.path.join(self.target, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.replace(os.path.join(self.path, rel), dst)
            manifest.write(self.target, entries)
            _drop_staging(self.path, remove=True)
            for d in {self.target} | {os.path.dirname(os.path.join(self.target, r))
                                      for r in written}:
                ser.fsync_dir(d)


class StagedFiles(_Staged):
    """`with StagedFiles(directory, prefix) as stage:` write files named `prefix...` under
    `stage.path`; leaving the block commits them into `directory` as one group (the
    directory's other files untouched), an exception discards them."""

    def __init__(self, directory, prefix):
        self.home = self.directory = os.path.realpath(os.path.abspath(os.fspath(directory)))
        self.prefix = prefix
        self.where = os.path.join(self.directory, prefix)

    def __enter__(self):
        try:
            os.makedirs(self.directory, exist_ok=True)
            settle(self.directory, self.prefix)
            self.path = _new_staging(self.directory, self.prefix, "files-staging")
        except OSError as e:
            raise self._cannot(e) from None
        return self

    def _commit(self):
        written = set(_files_under(self.path))
        with _locked(self.directory):
            _settle_locked(self.directory, self.prefix)
            manifest.write(self.path, _merged_manifest(self.path, written, self.directory))
            _fsync_tree(self.path)
            new = _leftover(self.directory, self.prefix, "files-new")
            os.rename(self.path, new)                       # the commit point
            _drop_staging(self.path, remove=False)
            ser.fsync_dir(self.directory)
            _move_files_in(new, self.directory)


@contextlib.contextmanager
def reading(path, prefix=None):
    """Settle `path` (a saved directory; with `prefix`, the directory of a file group), then
    hold a shared lock on its parent while the caller reads it, so no commit swaps it
    meanwhile. Yields the real path of the directory."""
    real = os.path.realpath(os.path.abspath(os.fspath(path)))
    parent, name = (real, prefix) if prefix is not None else os.path.split(real)
    try:
        settle(parent, name)
    except OSError as e:
        logger.warning("%s: could not settle an interrupted save: %s", path, e)
    with _locked(parent, exclusive=False):
        yield real


def retire(path):
    """Remove directory `path` so that a kill at any moment leaves it whole or gone: it is
    renamed to its `-old` name first (settling removes such leftovers)."""
    parent, name = os.path.split(os.path.realpath(os.path.abspath(path)))
    with _locked(parent):
        old = _leftover(parent, name, "old")
        if os.path.lexists(old):
            remove_tree(old)
        try:
            os.rename(os.path.join(parent, name), old)
        except FileNotFoundError:
            return
        ser.fsync_dir(parent)
        remove_tree(old)

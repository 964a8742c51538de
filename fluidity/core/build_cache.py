"""The one cache of compiled libraries: build, record, verify, load, evict.

Every shared library Fluidity compiles - the small C helpers beside their Python
(`core/native.py`: the MultiSlot parser, the sparse and Adam kernels, the AsyncExecutor's
loop), the C++ generated from programs and the CUDA builds (`codegen/build.py`) - goes
through here, because a library is code: loading one that somebody else put under the
name we expect runs their code in our process. So:

* **Where.** `$FLUIDITY_CACHE_DIR`, default `~/.cache/fluidity`; each kind of library in a
  subdirectory (`native/`, `codegen/`). Directories are created 0700 and files 0600/0700
  whatever the umask. A cache directory, or a file in it, that another user owns or that
  group or others can write is refused with `CacheSecurityError` naming it; so is an
  ancestor directory that another user (not root) owns or that others can write without the
  sticky bit (they could swap the cache itself). `$FLUIDITY_TRUSTED_CACHE_DIR` names a
  shared cache (a team's, on a build server) whose owners and permissions you vouch for:
  it is used instead, without those checks (its digests are still checked).
* **What.** An entry is `<stem>-<key>.so` (the binary; no extension for an executable),
  `<stem>-<key>.c`/`.cc`/`.cu` (its source, for reading), `<stem>-<key>.lock` (taken while
  it is built) and `<stem>-<key>.json`, its record: the sha256 of the source, of the
  toolchain (the compiler's identity - resolved path and `--version` - the flags, the link
  line, the runtime headers' digest), of the binary, and the binary's size, signed with
  HMAC-SHA256 under a key made once per cache (`.key`, 0600). The name's key is derived
  from the source and toolchain digests, so a changed compiler, flag, header or source
  builds anew.
* **Loading** (`load`): the binary is opened without following links, its owner and mode
  checked on the open file, its bytes hashed and compared with the record (whose signature
  and name are checked first), and the library loaded from its path only while that path
  is the file checked (the same inode before and after; nobody else can write the
  directory). A mismatch is `CacheIntegrityError` naming the file; `build` treats a
  tampered or half-written entry as absent and builds it again over it.
* **Building** (`build`): one builder per entry at a time (`flock` on a lock file of the
  entry, so threads and processes that need the same library wait for one compile); the
  compiler writes into a private temporary directory inside the cache, and the binary, its
  source and record are renamed into place only when the compile succeeded. A failed
  compile leaves nothing in the cache: the source is kept in a temporary directory outside
  it, which the error names.
* **Size** (`FLUIDITY_CACHE_MAX_MB`, default 512): after each build the least recently
  used entries (a load touches its record) are removed until the cache fits, but never one
  used in the last `GRACE_S` seconds (another process may be between building and loading
  it). Removing is unlinking: a process that loaded the library keeps its mapping, so a
  running program is never broken by an eviction.

`info()` and `clear()` are the public view of the cache (the `fluidity cache` command).
"""
import ctypes
import fcntl
import hashlib
import hmac
import json
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time

from ..errors import FluidityError

ENV_DIR = "FLUIDITY_CACHE_DIR"
ENV_TRUSTED = "FLUIDITY_TRUSTED_CACHE_DIR"
ENV_MAX_MB = "FLUIDITY_CACHE_MAX_MB"
DEFAULT_MAX_MB = 512
GRACE_S = 60.0
RECORD_VERSION = 1
KEY_FILE = ".key"
_RECORD_EXT = ".json"
_LOCK_EXT = ".lock"
_MAX_RECORD_BYTES = 1 << 16

__all__ = ["CacheError", "CacheSecurityError", "CacheIntegrityError", "root", "directory",
           "toolchain_id", "build", "load", "verify", "info", "clear", "evict"]


class CacheError(FluidityError):
    """The build cache cannot be used (a directory that cannot be created, a record that
    cannot be written)."""


class CacheSecurityError(CacheError, PermissionError):
    """A cache directory or file that another user owns, or that group or others can write:
    refused, since whoever can write there chooses the code we would load."""


class CacheIntegrityError(CacheError):
    """A cache entry whose binary, record or signature does not match: a tampered,
    swapped or half-written library. It is never loaded."""


# --- where ------------------------------------------------------------------------------
def root():
    """The cache's root directory (not created here): $FLUIDITY_TRUSTED_CACHE_DIR, else
    $FLUIDITY_CACHE_DIR, else ~/.cache/fluidity."""
    return os.path.abspath(os.environ.get(ENV_TRUSTED) or os.environ.get(ENV_DIR) or
                           os.path.join(os.path.expanduser("~"), ".cache", "fluidity"))


def trusted():
    """Whether the cache in use is a shared one named by $FLUIDITY_TRUSTED_CACHE_DIR
    (owners and permissions not checked)."""
    return bool(os.environ.get(ENV_TRUSTED))


def max_bytes():
    """The cache's size cap in bytes ($FLUIDITY_CACHE_MAX_MB, default 512 MB; 0 or less:
    no cap)."""
    text = os.environ.get(ENV_MAX_MB)
    try:
        mb = float(text) if text else DEFAULT_MAX_MB
    except ValueError:
        raise CacheError(f"${ENV_MAX_MB} must be a number of megabytes, got {text!r}") \
            from None
    return int(mb * (1 << 20)) if mb > 0 else 0


def _unsafe_mode(st):
    return st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _check_owned(path, st, what):
    """CacheSecurityError when `st` (of `path`) is another user's or group/other-writable."""
    if trusted():
        return
    me = os.geteuid()
    if st.st_uid != me:
        raise CacheSecurityError(
            f"refusing the build cache {what} {path}: it is owned by uid {st.st_uid}, not by "
            f"this user (uid {me}); remove it, set ${ENV_DIR} to a directory of your own, or "
            f"name a shared cache you trust with ${ENV_TRUSTED}")
    if _unsafe_mode(st):
        raise CacheSecurityError(
            f"refusing the build cache {what} {path}: group or others can write to it "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); chmod go-w it, or name a shared cache "
            f"you trust with ${ENV_TRUSTED}")


def _check_ancestors(path):
    """Every directory above the cache is root's or ours, and writable by others only with
    the sticky bit (as /tmp): else someone could move the cache away and put theirs."""
    if trusted():
        return
    me = os.geteuid()
    d = os.path.dirname(path)
    while True:
        try:
            st = os.stat(d)
        except OSError:
            st = None
        if st is not None:
            if st.st_uid not in (0, me):
                raise CacheSecurityError(
                    f"refusing the build cache under {d}: that directory is owned by uid "
                    f"{st.st_uid}, who could replace the cache; set ${ENV_DIR} elsewhere")
            if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
                raise CacheSecurityError(
                    f"refusing the build cache under {d}: others can write to that directory "
                    f"(mode {stat.S_IMODE(st.st_mode):04o}, no sticky bit) and so replace the "
                    f"cache; set ${ENV_DIR} elsewhere")
        parent = os.path.dirname(d)
        if parent == d:
            return
        d = parent


def _ensure_dir(path, what):
    """Create `path` (and any missing parent) 0700 whatever the umask, or check the one there;
    its path."""
    missing, d = [], path
    while not os.path.lexists(d):
        missing.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
            os.chmod(d, 0o700)        # mkdir's mode went through the umask
        except FileExistsError:
            pass                      # made by a racing process: checked below as any other
        except OSError as e:
            raise CacheError(f"cannot create the build cache {what} {d}: {e}") from None
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"the build cache {what} {path} is not a directory")
    _check_owned(path, st, what)
    return path


def directory(kind):
    """The checked (created 0700) directory of one kind of library, e.g. "native", "codegen"."""
    base = root()
    _check_ancestors(base)
    _ensure_dir(base, "directory")
    return _ensure_dir(os.path.join(base, kind), "directory")


# --- the signing key ----------------------------------------------------------------------
_keys = {}
_key_lock = threading.Lock()


def _key(base):
    """The cache's HMAC key (made once, 0600): a record an attacker writes without it does
    not verify."""
    with _key_lock:
        got = _keys.get(base)
        if got is not None:
            return got
        path = os.path.join(base, KEY_FILE)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            fd = None
        except OSError as e:
            raise CacheError(f"cannot create the build cache key {path}: {e}") from None
        if fd is not None:
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, os.urandom(32).hex().encode())
            finally:
                os.close(fd)
        data = _read_checked(path, "key", 1024)
        if len(data) < 32:         # a racing creator has not written it yet
            time.sleep(0.05)
            data = _read_checked(path, "key", 1024)
        if len(data) < 32:
            raise CacheIntegrityError(f"the build cache key {path} is damaged; remove it "
                                      "(every entry is then built again)")
        _keys[base] = data
        return data


def _open_checked(path, what):
    """(read-only descriptor, stat) of the cache file `path`, opened without following a
    link: a regular file, this user's and not writable by group or others (_check_owned),
    else CacheIntegrityError / CacheSecurityError naming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        raise CacheIntegrityError(f"cannot open the build cache {what} {path}: {e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CacheIntegrityError(f"the build cache {what} {path} is not a regular file")
        _check_owned(path, st, what)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _read_checked(path, what, limit):
    """The bytes (at most `limit`) of the cache file `path`, checked by _open_checked."""
    fd, st = _open_checked(path, what)
    try:
        if st.st_size > limit:
            raise CacheIntegrityError(f"the build cache {what} {path} is {st.st_size} bytes, "
                                      f"more than a {what} can be")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit + 1)
    finally:
        os.close(fd)


# --- toolchains -------------------------------------------------------------------------
_tool_ids = {}


def toolchain_id(compiler, *args):
    """A string naming a compiler exactly - its resolved path and what `--version` says - and
    the arguments of a build (flags, link line): part of every key and record."""
    exe = shutil.which(compiler) or compiler
    real = os.path.realpath(exe)
    ident = _tool_ids.get(real)
    if ident is None:
        try:
            r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
            version = (r.stdout or r.stderr).strip()
        except (OSError, subprocess.SubprocessError):
            version = "(unknown version)"
        ident = _tool_ids[real] = f"{real}\n{version}"
    return "\n".join([ident, *args])


# --- records ------------------------------------------------------------------------------
def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _entry(path):
    """(directory, stem-key) of an entry's binary path."""
    d, name = os.path.split(path)
    base = name[:-3] if name.endswith(".so") else name
    return d, base


def _record_path(path):
    d, base = _entry(path)
    return os.path.join(d, base + _RECORD_EXT)


def _sign(fields, key):
    body = json.dumps(fields, sort_keys=True).encode()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def _read_record(path):
    rec_path = _record_path(path)
    raw = _read_checked(rec_path, "record", _MAX_RECORD_BYTES)
    try:
        rec = json.loads(raw.decode())
        fields, mac = rec["fields"], rec["mac"]
        if not isinstance(fields, dict) or not isinstance(mac, str):
            raise TypeError
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise CacheIntegrityError(f"the build cache record {rec_path} is not a record") \
            from None
    base = os.path.dirname(os.path.dirname(path))
    if not hmac.compare_digest(mac, _sign(fields, _key(base))):
        raise CacheIntegrityError(f"the build cache record {rec_path} is not signed by this "
                                  "cache's key: refusing its library")
    if fields.get("version") != RECORD_VERSION or fields.get("name") != _entry(path)[1]:
        raise CacheIntegrityError(f"the build cache record {rec_path} is for another entry")
    return fields


def verify(path):
    """Check the entry whose binary is `path` against its signed record: CacheIntegrityError
    or CacheSecurityError when it does not match (see the module's docstring). Returns an
    open read-only file descriptor of the verified binary (the caller closes it)."""
    d = os.path.dirname(path)
    _check_owned(d, os.stat(d), "directory")
    fields = _read_record(path)
    fd, st = _open_checked(path, "library")
    try:
        if st.st_size != fields.get("bytes"):
            raise CacheIntegrityError(
                f"the cached library {path} is {st.st_size} bytes, its record says "
                f"{fields.get('bytes')}: refusing a swapped or damaged library")
        h = hashlib.sha256()
        with os.fdopen(os.dup(fd), "rb") as f:
            f.seek(0)
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        if not hmac.compare_digest(h.hexdigest(), str(fields.get("binary"))):
            raise CacheIntegrityError(
                f"the cached library {path} does not match the digest its record holds: "
                "refusing a swapped or damaged library")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _touch(path):
    try:
        os.utime(_record_path(path))       # its last use, for eviction
    except OSError:
        pass


# --- loading ----------------------------------------------------------------------------
_loaded = {}
_load_lock = threading.Lock()


def load(path):
    """The ctypes library of the cache entry `path`, verified (`verify`) and loaded from the
    very file that was checked; loaded once per process (its calls release the GIL)."""
    lib = _loaded.get(path)
    if lib is not None:
        return lib
    with _load_lock:
        lib = _loaded.get(path)
        if lib is not None:
            return lib
        fd = verify(path)
        try:
            checked = os.fstat(fd)
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise CacheError(f"cannot load the compiled library {path}: {e}") from None
            now = os.stat(path)
            if (now.st_dev, now.st_ino) != (checked.st_dev, checked.st_ino):
                raise CacheIntegrityError(f"the cached library {path} was replaced while it "
                                          "was being loaded")
        finally:
            os.close(fd)
        _touch(path)
        _loaded[path] = lib
        return lib


# --- building -----------------------------------------------------------------------------
def entry_path(kind, stem, source, toolchain, ext=".so"):
    """Where the binary of `source` built by `toolchain` lives (it may not exist yet), and its
    two digests: (path, source digest, toolchain digest)."""
    src_sha, tool_sha = _sha(source), _sha(toolchain.encode())
    key = _sha(f"{src_sha}:{tool_sha}".encode())[:20]
    return os.path.join(directory(kind), f"{stem}-{key}{ext}"), src_sha, tool_sha


def build(kind, stem, source, toolchain, compile_fn, fail, src_ext=".cc", ext=".so"):
    """Path of the verified binary of `source` (bytes: the text compiled; the caller folds the
    headers it includes into `toolchain` or `source` when they matter) built by `toolchain`
    (toolchain_id(...)), in the cache directory of `kind`; built now unless a verified entry
    is there.

    `compile_fn(src_path, out_path)` compiles the source file into `out_path` (both in a
    private temporary directory of the cache) and returns None, or the compiler's message
    when it failed; then nothing is left in the cache, the source is kept outside it, and
    `fail(kept_source_path, message)` makes the exception raised. An exception of
    `compile_fn` itself (a compiler that cannot be run) passes through, the cache as clean."""
    path, src_sha, tool_sha = entry_path(kind, stem, source, toolchain, ext)
    if _usable(path):
        return path
    d, base = _entry(path)
    lock = _open_lock(os.path.join(d, base + _LOCK_EXT))
    built = False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _usable(path):          # another thread or process built it meanwhile
            return path
        work = tempfile.mkdtemp(prefix=".build-", dir=d)
        try:
            src = os.path.join(work, base + src_ext)
            out = os.path.join(work, base + (ext or ".bin"))
            with open(src, "wb") as f:
                f.write(source)
            message = compile_fn(src, out)
            if message is not None:
                kept = os.path.join(failed_source_dir(), base + src_ext)
                shutil.copyfile(src, kept)
                raise fail(kept, message.replace(src, kept))
            os.chmod(out, 0o700 if not ext else 0o600)
            with open(out, "rb") as f:
                data = f.read()
            fields = {"version": RECORD_VERSION, "name": base, "source": src_sha,
                      "toolchain": tool_sha, "binary": _sha(data), "bytes": len(data),
                      "built": time.time()}
            rec = os.path.join(work, base + _RECORD_EXT)
            with open(rec, "w") as f:
                json.dump({"fields": fields, "mac": _sign(fields, _key(os.path.dirname(d)))},
                          f)
            for f in (src, rec):
                os.chmod(f, 0o600)
            os.replace(src, os.path.join(d, base + src_ext))
            os.replace(out, path)
            os.replace(rec, _record_path(path))
            built = True
        finally:
            shutil.rmtree(work, ignore_errors=True)
    finally:
        if not built and not os.path.lexists(path):
            _unlink(os.path.join(d, base + _LOCK_EXT))    # a failed build leaves nothing
        lock.close()
    evict()
    return path


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _open_lock(path):
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise CacheError(f"cannot create the build cache lock {path}: {e}") from None
    st = os.fstat(fd)
    try:
        _check_owned(path, st, "lock")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb+")


def _usable(path):
    """Whether a verified entry is at `path` (a tampered or damaged one counts as absent,
    and is built again over it; one another user owns stays an error)."""
    if path in _loaded:           # verified and loaded by this process already
        return True
    if not os.path.lexists(path):
        return False
    try:
        os.close(verify(path))
    except CacheSecurityError:
        raise
    except CacheIntegrityError:
        return False
    return True


_failed_dir = None


def failed_source_dir():
    """The private temporary directory (outside the cache) where the sources of failed
    builds are kept for reading."""
    global _failed_dir
    if _failed_dir is None or not os.path.isdir(_failed_dir):
        _failed_dir = tempfile.mkdtemp(prefix="fluidity-failed-build-")
    return _failed_dir


# --- size and the public view ------------------------------------------------------------
def _entries(base):
    """{(kind dir, stem-key): [files]} of every entry under the cache root (binary, source,
    record and lock share the name before the first dot)."""
    out = {}
    try:
        kinds = [os.path.join(base, k) for k in os.listdir(base)
                 if not k.startswith(".") and os.path.isdir(os.path.join(base, k))]
    except OSError:
        return out
    for d in kinds:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for f in names:
            if not f.startswith("."):
                out.setdefault((d, f.split(".", 1)[0]), []).append(os.path.join(d, f))
    return out


def _entry_stats(files):
    """(bytes, last use, whether it holds a library) of one entry: its files' sizes, its
    record's mtime (a load touches it; else the newest file's)."""
    size, used, record = 0, 0.0, None
    for f in files:
        try:
            st = os.lstat(f)
        except OSError:
            continue
        size += st.st_size
        used = max(used, st.st_mtime)
        if f.endswith(_RECORD_EXT):
            record = st.st_mtime
    return size, used if record is None else record, record is not None


def evict(limit=None):
    """Remove least recently used entries until the cache holds at most `limit` bytes
    (default: max_bytes()), sparing entries used in the last GRACE_S seconds; returns the
    number of entries removed."""
    limit = max_bytes() if limit is None else limit
    base = root()
    if limit <= 0 or not os.path.isdir(base):
        return 0
    lock = _open_lock(os.path.join(base, ".evict" + _LOCK_EXT))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = [(files,) + _entry_stats(files) for files in _entries(base).values()]
        total = sum(e[1] for e in entries)
        now, removed = time.time(), 0
        for files, size, used, _lib in sorted(entries, key=lambda e: e[2]):
            if total <= limit:
                break
            if now - used < GRACE_S:
                continue
            for f in files:
                _unlink(f)
            total -= size
            removed += 1
        return removed
    finally:
        lock.close()


def info():
    """What the cache holds: {"path": its root directory, "trusted": whether it is a shared
    cache named by $FLUIDITY_TRUSTED_CACHE_DIR, "entries": the number of libraries and
    executables, "bytes": what it takes on disk, "max_bytes": the cap (0: none)}."""
    base = root()
    stats = [_entry_stats(files) for files in _entries(base).values()]
    return {"path": base, "trusted": trusted(), "entries": sum(1 for s in stats if s[2]),
            "bytes": sum(s[0] for s in stats), "max_bytes": max_bytes()}


def clear():
    """Remove every entry of the cache (a library a running process loaded keeps running);
    returns the number of libraries and executables removed."""
    base = root()
    if not os.path.isdir(base):
        return 0
    _check_ancestors(base)
    _check_owned(base, os.stat(base), "directory")
    removed = 0
    for files in _entries(base).values():
        removed += _entry_stats(files)[2]
        for f in files:
            _unlink(f)
    return removed

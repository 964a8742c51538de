"""Paddle's binary tensor records, byte for byte, and atomic file writes.

LoDTensor record (Paddle >= 0.12, unchanged through 2.x; little-endian, no padding):

    uint32 version = 0
    uint64 lod_level
    per level: uint64 byte size, then that many bytes of uint64 offsets
    uint32 tensor version = 0
    int32  N = byte length of a serialized VarType.TensorDesc (data_type, dims)
    N bytes of TensorDesc
    numel * itemsize bytes of raw C-order data

SelectedRows record: uint32 version 0, uint64 row count, int64 row ids, int64 height, then
the dense tensor part (from `uint32 tensor version` on) of the value [rows, width].

A combined parameter file (`save_combine`, `.pdiparams`) is LoDTensor records back to back,
with no names: the reader must know the variables (sorted by name) from the program.

Readers check everything and raise `FormatError` saying what is wrong; callers prefix the
file name.
"""
import contextlib
import io
import math
import os
import struct
import uuid

import numpy as np

from ..errors import FluidityError, FormatError
from ..proto import framework_pb2 as pb
from . import dtypes, proto_check
from .tensor import LoDTensor, SelectedRows, check_lod

TENSOR_VERSION = 0
_CHUNK = 1 << 24




# ---------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------
def _le(arr):
    """A C-contiguous little-endian view/copy of `arr`."""
    arr = np.asarray(arr)
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and not np.little_endian):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr if arr.flags.c_contiguous else arr.copy(order="C")  # keeps 0-d arrays 0-d


def write_dense(f, array):
    """The dense Tensor part: version, TensorDesc, raw data."""
    array = _le(array)
    desc = pb.VarType.TensorDesc(data_type=dtypes.to_code(array.dtype))
    desc.dims.extend(int(d) for d in array.shape)
    blob = desc.SerializeToString()
    f.write(struct.pack("<Ii", TENSOR_VERSION, len(blob)))
    f.write(blob)
    if array.size:
        f.write(array.reshape(-1).view(np.uint8).data)


def write_lod_tensor(f, tensor, lod=None):
    """Write one LoDTensor record of `tensor` (a LoDTensor or an array; `lod` overrides)."""
    if isinstance(tensor, LoDTensor):
        if tensor._array is None:
            raise FormatError("cannot serialize an uninitialized LoDTensor")
        array, lod = tensor._array, tensor._lod if lod is None else lod
    else:
        array = tensor
    lod = lod or []
    f.write(struct.pack("<IQ", TENSOR_VERSION, len(lod)))
    for level in lod:
        offsets = np.asarray(level, dtype="<u8")
        f.write(struct.pack("<Q", offsets.nbytes))
        f.write(offsets.tobytes())
    write_dense(f, array)


def write_selected_rows(f, sr):
    rows = np.asarray(sr.rows, dtype="<i8")
    f.write(struct.pack("<IQ", TENSOR_VERSION, len(rows)))
    f.write(rows.tobytes())
    f.write(struct.pack("<q", int(sr.height)))
    value = sr.value if sr.value is not None else np.zeros((0,), np.float32)
    write_dense(f, value)


def lod_tensor_to_bytes(tensor, lod=None):
    buf = io.BytesIO()
    write_lod_tensor(buf, tensor, lod)
    return buf.getvalue()


def selected_rows_to_bytes(sr):
    buf = io.BytesIO()
    write_selected_rows(buf, sr)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------
class _Reader:
    """Exact reads from a file object, tracking the offset and (when knowable) how many
    bytes are left, so a corrupt length never makes us allocate gigabytes."""

    def __init__(self, f):
        self.f = f
        self.pos = 0
        self.left = None
        try:
            if f.seekable():
                here = f.tell()
                end = f.seek(0, os.SEEK_END)
                f.seek(here)
                self.left = end - here
        except (AttributeError, OSError):
            pass

    def short(self, what, n, got):
        return FormatError(f"truncated data: expected {n} bytes of {what} at offset "
                           f"{self.pos}, got {got}")

    def read(self, n, what):
        if self.left is not None and n > self.left:
            raise self.short(what, n, self.left)
        parts, got = [], 0
        while got < n:
            b = self.f.read(min(n - got, _CHUNK))
            if not b:
                raise self.short(what, n, got)
            parts.append(b)
            got += len(b)
        self.pos += n
        if self.left is not None:
            self.left -= n
        return b"".join(parts)

    def unpack(self, fmt, what):
        return struct.unpack(fmt, self.read(struct.calcsize(fmt), what))

    def read_array(self, dtype, shape, what):
        n = dtype.itemsize
        for d in shape:
            n *= d
        if self.left is not None and n > self.left:
            raise self.short(what, n, self.left)
        try:
            out = np.empty(shape, dtype=dtype.newbyteorder("<"))
        except (ValueError, MemoryError):
            raise FormatError(f"implausible tensor size: {what}") from None
        view = out.reshape(-1).view(np.uint8)
        got = 0
        while got < n:
            k = self.f.readinto(view[got:got + _CHUNK].data)
            if not k:
                raise self.short(what, n, got)
            got += k
        self.pos += n
        if self.left is not None:
            self.left -= n
        return out if out.dtype.isnative else out.astype(out.dtype.newbyteorder("="))

    def skip(self, n, what):
        if self.left is not None:
            if n > self.left:
                raise self.short(what, n, self.left)
            self.f.seek(n, os.SEEK_CUR)
            self.pos += n
            self.left -= n
            return
        while n:
            n -= len(self.read(min(n, _CHUNK), what))

    def at_end(self):
        if self.left is not None:
            return self.left == 0
        return not self.f.read(1)


def _check_version(r, what):
    (v,) = r.unpack("<I", f"{what} version")
    if v != TENSOR_VERSION:
        raise FormatError(f"unsupported {what} version {v} at offset {r.pos - 4} (expected "
                          f"{TENSOR_VERSION}; is this a Paddle tensor/parameter file?)")


_MAX_DESC = 1 << 20        # a TensorDesc is a dtype and a few dims: tens of bytes
_INT64_MAX = (1 << 63) - 1


def _read_tensor_desc(r):
    """(numpy dtype, dims) of the TensorDesc at the reader, checked: known element type
    numpy has, every dim >= 0 (a record holds a concrete tensor; [] is a 0-D one), a byte
    size that fits an int64."""
    (n,) = r.unpack("<i", "TensorDesc length")
    if n < 0 or n > _MAX_DESC:
        raise FormatError(f"bad TensorDesc length {n} at offset {r.pos - 4}")
    at = f"bad TensorDesc ({n} bytes at offset {r.pos})"
    blob = r.read(n, "TensorDesc")
    desc = pb.VarType.TensorDesc()
    try:
        desc.ParseFromString(blob)
    except Exception as e:  # protobuf's DecodeError and friends
        raise FormatError(f"{at}: {e}") from None
    proto_check.check_message(desc, at)
    code, dims = desc.data_type, list(desc.dims)
    dtype = dtypes.numpy_of_code(code)
    if dtype is None:
        raise FormatError(f"unknown or unsupported tensor dtype {pb.VarType.Type.Name(code)} "
                          f"in TensorDesc")
    if any(d < 0 for d in dims):
        raise FormatError(f"{at}: negative dims {dims}")
    if dtype.itemsize * math.prod(dims) > _INT64_MAX:
        raise FormatError(f"{at}: impossible shape {dims}: its size overflows an int64")
    return dtype, dims


def _read_dense(r, window=None):
    _check_version(r, "tensor")
    dtype, dims = _read_tensor_desc(r)
    what = f"{dtypes.name(dtype)}{dims} data"
    if window is None:
        return r.read_array(dtype, dims, what)
    seek, shape = window
    total, want = math.prod(dims), math.prod(shape)
    if seek < 0 or any(d < 0 for d in shape) or seek + want > total:
        raise FormatError(f"cannot read shape {list(shape)} ({want} elements) from element "
                          f"{seek} of a tensor {dtypes.name(dtype)}{dims} ({total} elements)")
    r.skip(seek * dtype.itemsize, what)
    out = r.read_array(dtype, shape, what)
    r.skip((total - seek - want) * dtype.itemsize, what)
    return out


def read_lod_tensor(f, window=None):
    """Read one LoDTensor record from a binary file object. window=(seek, shape): return
    only `shape` elements starting at element `seek` (the `load` op's partial read; no LoD)."""
    r = f if isinstance(f, _Reader) else _Reader(f)
    _check_version(r, "LoDTensor")
    (levels,) = r.unpack("<Q", "LoD level count")
    if r.left is not None and levels > r.left // 8:
        raise r.short(f"{levels} LoD levels", 8 * levels, r.left)
    lod = []
    for i in range(levels):
        (size,) = r.unpack("<Q", f"LoD level {i} size")
        if size % 8:
            raise FormatError(f"bad LoD level {i}: byte size {size} is not a multiple of 8")
        offsets = np.frombuffer(r.read(size, f"LoD level {i} offsets"), dtype="<u8")
        lod.append([int(o) for o in offsets])
    array = _read_dense(r, window)
    if window is not None:
        return LoDTensor(array)
    if lod:
        if not array.ndim:
            raise FormatError(f"a 0-D tensor cannot have a LoD ({levels} level(s))")
        try:
            lod = check_lod(lod, array.shape[0])
        except FluidityError as e:
            raise FormatError(f"bad LoD: {e}") from None
    return LoDTensor(array, lod)


def read_selected_rows(f):
    r = f if isinstance(f, _Reader) else _Reader(f)
    _check_version(r, "SelectedRows")
    (n,) = r.unpack("<Q", "row count")
    rows = np.frombuffer(r.read(8 * n, f"{n} row ids"), dtype="<i8").astype(np.int64)
    (height,) = r.unpack("<q", "height")
    value = _read_dense(r)
    if value.ndim == 0 or value.shape[0] != n:
        raise FormatError(f"SelectedRows has {n} rows but its value has shape "
                          f"{list(value.shape)}")
    if n and (rows.min() < 0 or rows.max() >= height):
        raise FormatError(f"SelectedRows row ids must lie in [0, {height}), got "
                          f"[{rows.min()}, {rows.max()}]")
    return SelectedRows(rows, height, value)


def _whole(data, reader):
    r = _Reader(io.BytesIO(data))
    out = reader(r)
    if not r.at_end():
        raise FormatError(f"{r.left} unexpected bytes after the record")
    return out


def lod_tensor_from_bytes(data):
    """One LoDTensor record that must be all of `data`."""
    return _whole(data, read_lod_tensor)


def selected_rows_from_bytes(data):
    return _whole(data, read_selected_rows)


def reader(f):
    """A reader over file object `f` for several records (read_*(r) accept it); `r.at_end()`."""
    return _Reader(f)


# ---------------------------------------------------------------------------------------
# files: what the load ops and fluid.io read
# ---------------------------------------------------------------------------------------
@contextlib.contextmanager
def _file_reader(path, what=""):
    """A reader over file `path`; a FormatError or OSError inside becomes an error saying
    "<path>: <what><problem>" (FormatError, or FluidityError when it cannot be read)."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise FluidityError(f"{path}: cannot read: {e.strerror or e}") from None
    with f:
        try:
            yield _Reader(f)
        except FormatError as e:
            raise FormatError(f"{path}: {what}{e}") from None
        except OSError as e:
            raise FluidityError(f"{path}: {what}cannot read: {e.strerror or e}") from None


def _left(r):
    return r.left if r.left is not None else "some"


def load_tensor_file(path, selected_rows=False, window=None, name=None):
    """The one tensor record of file `path` (Paddle's `save` op / `save_vars` per-variable
    file): a LoDTensor, or a SelectedRows when `selected_rows`; `window=(seek, shape)` reads
    that slice only (then bytes after the record are not checked). Problems raise
    FormatError (a ValueError), or FluidityError when the file cannot be read, saying
    "<path>: [variable '<name>': ]<what is wrong>"."""
    with _file_reader(path, f"variable '{name}': " if name is not None else "") as r:
        value = read_selected_rows(r) if selected_rows else read_lod_tensor(r, window)
        if window is None and not r.at_end():
            raise FormatError(f"{_left(r)} unexpected bytes after the record")
    return value


def load_combined_file(path, names):
    """The LoDTensor records of a combined parameter file (`save_combine`, `.pdiparams`),
    one per name in `names` (the variables in the order they were saved: sorted by name);
    the file must hold exactly that many. Read whole before anything is returned. Errors
    as `load_tensor_file`'s, naming the record's variable."""
    names = list(names)
    values = []
    with _file_reader(path) as r:
        for k, n in enumerate(names):
            try:
                values.append(read_lod_tensor(r))
            except FormatError as e:
                raise FormatError(f"variable #{k} '{n}' of the {len(names)} expected (records "
                                  f"are in name order): {e}") from None
        if not r.at_end():
            raise FormatError(f"{_left(r)} bytes left after the last of the {len(names)} "
                              f"variables the program expects; the file belongs to another "
                              f"program, or is corrupt")
    return values


# ---------------------------------------------------------------------------------------
# atomic files
# ---------------------------------------------------------------------------------------
def atomic_write(path, write):
    """Create/replace `path` so that readers see the old file or the complete new one,
    never a part: `write(f)` fills a temporary file in the same directory, which is fsynced
    and then renamed over `path`. On any failure the temporary file is removed and the
    old file is untouched. OSError becomes a FluidityError naming the file."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, f".{os.path.basename(path)}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        os.makedirs(d, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as e:
        raise FluidityError(f"{path}: cannot write: {e.strerror or e}") from None
    fsync_dir(d)


def fsync_dir(d):
    """Make a directory's entries (renames, new files) durable; best effort (fluidity.io.atomic
    fsyncs the directories whose entries it renames)."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_file(path):
    """All bytes of `path`, or a FluidityError naming it."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise FluidityError(f"{path}: cannot read: {e.strerror or e}") from None

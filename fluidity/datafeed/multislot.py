"""MultiSlotReader: batches of LoDTensors from MultiSlot text files, streamed.

Each line holds, for every slot of the DataFeedDesc in declaration order, a count and then
that many values: uint64 ids for "uint64" slots, numbers for "float" slots
(`3 1926 8 17 1 1` = words [1926, 8, 17], label [1]). Each batch is a dict
{slot name: LoDTensor} over the *used* slots:

* sparse slot (is_dense false): values of shape [total, 1] (int64 ids or float32) with
  lod [[0, n1, n1+n2, ...]], one sequence per example;
* dense slot: shape [batch, *dims] without lod; dims come from the slot's shape (a leading
  -1 stands for the batch) or, without one, from the count on the first line, which every
  line must then repeat.

Files are read in chunks of `chunk_size` bytes (a partial last line is carried over to the
next chunk), so they may be larger than memory. A chunk is parsed by a small C function
(multislot_parser.c, compiled on first use with `cc -O2 -shared -fPIC` into a cache
directory keyed by the source's hash; ctypes calls release the GIL) into flat per-slot
buffers and offsets; numpy only slices them into batches. Without a C compiler a pure-Python
parser with the same rules and the same errors is used, after a one-line warning.

Unused slots' counts are checked, their values skipped unread. Blank lines (empty or only
spaces) hold no example: they are skipped, counted in `blank_lines`, and a warning at the end
of the pass says how many there were and where the first was. A malformed line raises
DataError naming the file, the line and the fault; with skip_bad_lines=True it is skipped,
counted in `skipped_lines`, and the same warning says how many were skipped and what was
wrong with the first. Count 0 is allowed (an empty sequence); Paddle rejects it.

Values are checked, not only parsed: a uint64 id above 2^63-1 (the int64 tensor it goes to
cannot hold it) or with a minus sign is a bad line, never a wrapped id; a float that is nan,
inf, or overflows float32 (1e39) is a bad line unless `allow_nonfinite=True` (the reader's
argument, or `DataFeedDesc.allow_nonfinite`, which AsyncExecutor's readers take), since one
such value turns a whole training run into loss=nan.

Every batch is a `Batch`: a dict whose `origin` says where its examples came from, a tuple
of `Origin(path, first_line, last_line)` (1-based, inclusive; one per file the batch spans),
for errors about fed data to name the file and lines.
"""
import collections
import ctypes
import os
import re
import warnings

import numpy as np

from ..core import native
from ..core.tensor import LoDTensor
from .data_feed_desc import DataFeedDesc, dense_dims, slot_kind
from .errors import DataError, DataWarning
from .sources import as_source, is_source

CHUNK_SIZE = 2 << 20

# error codes, as in multislot_parser.c
(COUNT_MISSING, COUNT_NOT_INT, COUNT_NEGATIVE, TOO_FEW, BAD_VALUE, EXTRA, DENSE_DIM, NONFINITE,
 ID_RANGE, NEGATIVE_ID) = range(1, 11)
SKIP_BAD, ALLOW_NONFINITE = 1, 2   # ms_parse's flags
UINT64, FLOAT = 0, 1
INT64_MAX = (1 << 63) - 1
FLOAT32_OVERFLOW = 2.0 ** 128 - 2.0 ** 103  # the least double that rounds to inf as a float
_DTYPES = {UINT64: np.int64, FLOAT: np.float32}
_KIND_NAMES = {UINT64: "uint64", FLOAT: "float"}


# --- the C parser: build once, cache by content hash -------------------------------------

_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multislot_parser.c")
_c_parser = None  # the ctypes function, or the DataError saying why it could not be built


def _build_c_parser():
    try:
        fn = native.load(_SRC).ms_parse
    except native.NativeBuildError as e:
        raise DataError(str(e)) from None
    except AttributeError as e:
        raise DataError(f"the compiled MultiSlot parser lacks ms_parse: {e}") from None
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    fn.argtypes = [ctypes.c_char_p, i64, p, i32, p, p, i32, p, p, p, p, i64, i32, p, p]
    fn.restype = ctypes.c_int
    return fn


def c_parser():
    """The compiled C parser; raises DataError (once per process) if it cannot be built."""
    global _c_parser
    if _c_parser is None:
        try:
            native.forget(_SRC)  # a reset (tests) rebuilds under the current $CC
            _c_parser = _build_c_parser()
        except DataError as e:
            _c_parser = e
    if isinstance(_c_parser, DataError):
        raise _c_parser
    return _c_parser


def build():
    """Build (or load from the cache) the C parser now; False when it cannot be built (a
    warning says why once, and the pure-Python parser is used)."""
    return _select_backend("auto") is not None


def _select_backend(backend):
    if backend == "python":
        return None
    if backend not in ("auto", "c"):
        raise DataError(f"backend must be 'auto', 'c' or 'python', got {backend!r}")
    first_try = _c_parser is None
    try:
        return c_parser()
    except DataError as e:
        if backend == "c":
            raise
        if first_try:
            warnings.warn(f"{e}; using the pure-Python MultiSlot parser (much slower)",
                          DataWarning, stacklevel=3)
        return None


# --- slot layout and parsed chunks -------------------------------------------------------

class _Layout:
    """What the parsers need to know about the slots, as flat arrays."""

    def __init__(self, desc):
        slots = desc.slots
        if not any(s.is_used for s in slots):
            raise DataError(f"DataFeedDesc {desc.source} uses no slot; mark some with "
                            f"set_use_slots (it declares {desc.slot_names})")
        self.names = [s.name for s in slots]
        self.kinds = np.array([UINT64 if slot_kind(s) == "uint64" else FLOAT for s in slots],
                              np.int32)
        self.used = [i for i, s in enumerate(slots) if s.is_used]
        self.use = np.full(len(slots), -1, np.int32)
        self.use[self.used] = np.arange(len(self.used), dtype=np.int32)
        self.dims = []       # per used slot: None (sparse), () (dense, dims from data), dims
        dense_dim = []       # per used slot: 0 sparse, -1 dense with unknown dim, else dim
        for i in self.used:
            dims = dense_dims(slots[i]) if slots[i].is_dense else None
            if not slots[i].is_dense:
                self.dims.append(None)
                dense_dim.append(0)
            else:
                self.dims.append(dims or ())
                dense_dim.append(int(np.prod(dims)) if dims else -1)
        self.dense_dim = np.array(dense_dim, np.int64)
        self.sparse_rows = [u for u, d in enumerate(self.dims) if d is None]


Origin = collections.namedtuple("Origin", "path first_line last_line")
Origin.__doc__ = "Lines first_line..last_line (1-based, inclusive) of data file `path`."


class Batch(dict):
    """{used slot name: LoDTensor}, and `origin`: the Origin of each file's part of it."""
    __slots__ = ("origin",)

    def __init__(self, items, origin):
        super().__init__(items)
        self.origin = origin

    def __reduce__(self):  # pickles (forked workers' queues) keep the origin
        return Batch, (dict(self), self.origin)


class _Chunk:
    """The parse of one chunk: per used slot, values and offsets[u, e] (value index where
    example e starts); `line_of[e]`: example e's line in the chunk (from 0); `bad` = (line in
    chunk, slot, code, token, found, expected). `path` and `base` (lines of the file before
    the chunk) are set by the reader. `blank`: blank lines skipped, `first_blank` the
    first one's line in the chunk (from 0) or -1."""
    __slots__ = ("n", "vals", "offs", "lines", "skipped", "bad", "line_of", "path", "base",
                 "blank", "first_blank")

    def __init__(self, n, vals, offs, lines, skipped, bad, line_of=None, blank=0,
                 first_blank=-1):
        self.n, self.vals, self.offs = n, vals, offs
        self.lines, self.skipped, self.bad = lines, skipped, bad
        self.line_of = line_of
        self.blank, self.first_blank = blank, first_blank
        self.path, self.base = None, 0

    def origin(self, a, b):
        """The Origin of examples [a, b) of this chunk (b > a)."""
        return Origin(self.path, self.base + int(self.line_of[a]) + 1,
                      self.base + int(self.line_of[b - 1]) + 1)


def _line_end(buf, n):
    """The offset just past the n-th newline of buf, or 0 when it has fewer; the bytes are
    searched in growing windows from the start, so the cost is that of the n lines."""
    if n <= 0:
        return 0
    view = np.frombuffer(buf, np.uint8)
    pos, seen, window = 0, 0, 1 << 16
    while pos < view.size:
        nl = np.flatnonzero(view[pos:pos + window] == 10)
        if seen + nl.size >= n:
            return pos + int(nl[n - seen - 1]) + 1
        seen, pos, window = seen + nl.size, pos + window, window * 2
    return 0


class _Err(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int64) for f in
                ("line", "slot", "code", "tok_start", "tok_len", "found", "expected")]


class _CParser:
    def __init__(self, fn, layout, skip, allow_nonfinite):
        self.fn, self.L = fn, layout
        self.flags = (SKIP_BAD if skip else 0) | (ALLOW_NONFINITE if allow_nonfinite else 0)
        self.per_line = [4.0] * len(layout.used)  # values per line, to size the buffers

    def parse(self, buf, dense_dim):
        L, nu = self.L, len(self.L.used)
        stride = buf.count(b"\n") + 2
        offs = np.empty((nu, stride), np.int64)
        line_of = np.empty(stride, np.int64)
        caps = np.array([int(r * stride * 1.2) + 64 for r in self.per_line], np.int64)
        vals = [np.empty(c, _DTYPES[L.kinds[i]]) for c, i in zip(caps, L.used)]
        ptrs = (ctypes.c_void_p * max(nu, 1))(*[v.ctypes.data for v in vals])
        state, err = np.zeros(8, np.int64), _Err()
        state[7] = -1
        while True:
            rc = self.fn(buf, len(buf), state.ctypes.data, len(L.kinds), L.kinds.ctypes.data,
                         L.use.ctypes.data, nu, dense_dim.ctypes.data, ptrs, caps.ctypes.data,
                         offs.ctypes.data, stride, self.flags, line_of.ctypes.data,
                         ctypes.byref(err))
            if rc != 1:
                break
            u, need = int(state[4]), int(state[5])  # a slot's buffer is full: grow it
            assert u >= 0, "MultiSlot parser: offsets buffer too small"
            grown = np.empty(max(need, 2 * int(caps[u])), vals[u].dtype)
            grown[:caps[u]] = vals[u]
            vals[u], caps[u], ptrs[u] = grown, len(grown), grown.ctypes.data
        if rc < 0:
            raise MemoryError("MultiSlot parser: out of memory")
        n = int(state[2])
        bad = None
        if rc == 2 or state[3]:
            tok = buf[err.tok_start:err.tok_start + err.tok_len]
            bad = (err.line, err.slot, err.code, tok, err.found, err.expected)
        if rc == 2:
            return _Chunk(n, None, None, int(state[1]), 0, bad)
        for u in range(nu):
            if n:
                self.per_line[u] = int(offs[u, n]) / n
            vals[u] = vals[u][:offs[u, n]]
        return _Chunk(n, vals, offs[:, :n + 1], int(state[1]), int(state[3]), bad, line_of[:n],
                      int(state[6]), int(state[7]))


def _lod_lists(lod):
    """Rows of a 2-D offsets array as lists; equal rows share one list (in CTR data every
    sparse slot often has one id per example), which saves most of the conversion."""
    if not len(lod):
        return []
    same = (lod == lod[0]).all(axis=1).tolist()
    first = lod[0].tolist()
    return [first if eq else row.tolist() for eq, row in zip(same, lod)]


def _origin(pieces):
    """The Origins of (chunk, a, b) pieces of a batch: one per file, lines merged."""
    out = []
    for c, a, b in pieces:
        o = c.origin(a, b)
        if out and out[-1].path == o.path:
            out[-1] = out[-1]._replace(last_line=o.last_line)
        else:
            out.append(o)
    return tuple(out)


class _BadLine(Exception):
    pass


class _BadValue(Exception):
    """A value of a used slot is wrong; args[0] is the error code."""


_FLOAT_RE = re.compile(rb"[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)",
                       re.IGNORECASE)


def _py_uint64(tok):
    if not tok.isdigit():
        negative = tok[:1] == b"-" and tok[1:].isdigit()
        raise _BadValue(NEGATIVE_ID if negative else BAD_VALUE)
    v = int(tok)
    if v > INT64_MAX:
        raise _BadValue(ID_RANGE)
    return v


def _py_float(tok):
    if _FLOAT_RE.fullmatch(tok) is None:
        raise _BadValue(BAD_VALUE)
    return float(tok)


def _py_finite_float(tok):
    v = _py_float(tok)
    if not -FLOAT32_OVERFLOW < v < FLOAT32_OVERFLOW:  # nan fails both
        raise _BadValue(NONFINITE)
    return v


class _PyParser:
    """The fallback: the same rules as multislot_parser.c, one line at a time."""

    def __init__(self, layout, skip, allow_nonfinite):
        self.L, self.skip = layout, skip
        conv = {UINT64: _py_uint64, FLOAT: _py_float if allow_nonfinite else _py_finite_float}
        self.slots = [(conv[int(k)], int(u)) for k, u in zip(layout.kinds, layout.use)]

    def parse(self, buf, dense_dim):
        nu = len(self.L.used)
        lines = buf.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        vals, counts, line_of = [[] for _ in range(nu)], [[] for _ in range(nu)], []
        skipped, first_bad, blank, first_blank = 0, None, 0, -1
        for li, line in enumerate(lines):
            toks = line.split()
            if not toks:
                if not blank:
                    first_blank = li
                blank += 1
                continue
            try:
                row = self._line(toks, dense_dim)
            except _BadLine as e:
                if not self.skip:
                    return _Chunk(0, None, None, len(lines), 0, (li,) + e.args)
                skipped += 1
                first_bad = first_bad or (li,) + e.args
                continue
            line_of.append(li)
            for u, vs in enumerate(row):
                vals[u].extend(vs)
                counts[u].append(len(vs))
                if dense_dim[u] < 0:
                    dense_dim[u] = len(vs)
        n = len(line_of)
        offs = np.zeros((nu, n + 1), np.int64)
        if n:
            np.cumsum(np.array(counts, np.int64), axis=1, out=offs[:, 1:])
        with np.errstate(over="ignore"):  # 1e39 -> inf in float32 (allow_nonfinite), as in C
            arrays = [np.array(v, _DTYPES[self.L.kinds[i]]) for v, i in zip(vals, self.L.used)]
        return _Chunk(n, arrays, offs, len(lines), skipped, first_bad,
                      np.array(line_of, np.int64), blank, first_blank)

    def _line(self, toks, dense_dim):
        j, ntok, row = 0, len(toks), []
        for s, (conv, u) in enumerate(self.slots):
            if j >= ntok:
                raise _BadLine(s, COUNT_MISSING, b"", 0, 0)
            ct = toks[j]
            if not ct.isdigit():
                negative = ct[:1] == b"-" and ct[1:].isdigit()
                raise _BadLine(s, COUNT_NEGATIVE if negative else COUNT_NOT_INT, ct, 0, 0)
            cnt = int(ct)
            vs = toks[j + 1:j + 1 + cnt]
            j += 1 + cnt
            if u >= 0:
                out = []
                for v in vs:
                    try:
                        out.append(conv(v))
                    except _BadValue as e:
                        raise _BadLine(s, e.args[0], v, 0, 0) from None
            if len(vs) < cnt:
                raise _BadLine(s, TOO_FEW, ct, len(vs), 0)
            if u >= 0:
                if dense_dim[u] > 0 and cnt != dense_dim[u]:
                    raise _BadLine(s, DENSE_DIM, ct, cnt, int(dense_dim[u]))
                row.append(out)
        if j < ntok:
            raise _BadLine(len(self.slots) - 1, EXTRA, toks[j], ntok - j, 0)
        return row


# what a bad line's error code means: formats over the facts `_error` gathers
_WHY = {
    COUNT_MISSING: "slot '{name}': count missing (the line ends after {s} of {nslots} slots)",
    COUNT_NOT_INT: "slot '{name}': count {tok} is not an integer",
    COUNT_NEGATIVE: "slot '{name}': negative count {tok}",
    TOO_FEW: "slot '{name}': count {tok} but only {found} value(s) follow",
    BAD_VALUE: "slot '{name}': value {tok} is not a valid {kind}",
    EXTRA: "{found} extra token(s) after the last slot, starting with {tok}",
    DENSE_DIM: "dense slot '{name}' has {found} value(s) where {expected} are expected "
               "(from {source})",
    NONFINITE: "slot '{name}': value {tok} is not a finite float32 (nan, inf, or beyond "
               "+-3.4e38); allow_nonfinite=True (MultiSlotReader or DataFeedDesc) keeps such "
               "values",
    ID_RANGE: "slot '{name}': id {tok} is above 2^63-1, the largest id an int64 tensor holds",
    NEGATIVE_ID: "slot '{name}': negative id {tok}; uint64 ids are 0 to 2^63-1",
}


# --- the reader --------------------------------------------------------------------------

class MultiSlotReader:
    """Iterate batches ({used slot name: LoDTensor}) over MultiSlot files, in order.

    desc: a DataFeedDesc (or the path of one); files: paths, read one after another (a
    batch may span two files; the last batch may be short). batch_size defaults to the
    desc's. backend: "auto" (C, else Python with a warning), "c" or "python".
    allow_nonfinite: keep float values that are nan, inf or overflow float32 (read as inf)
    instead of rejecting their lines; None takes the desc's `allow_nonfinite` (False).
    Each batch is a `Batch` (a dict) whose `origin` names the file(s) and lines it holds.
    Each iteration re-reads the files; `skipped_lines` (malformed lines skipped),
    `blank_lines` and `examples` describe the last one.
    One reader per worker thread: a reader is not to be iterated by two threads at once.
    Equal LoDs in a batch may be one shared list object: treat LoD lists as read-only.
    """

    def __init__(self, desc, files, batch_size=None, skip_bad_lines=False,
                 chunk_size=CHUNK_SIZE, backend="auto", allow_nonfinite=None):
        if not isinstance(desc, DataFeedDesc):
            desc = DataFeedDesc(desc)
        self.desc = desc
        self._layout = _Layout(desc)
        self.files = [_as_item(files)] if isinstance(files, (str, os.PathLike)) or \
            is_source(files) else [_as_item(f) for f in files]
        self.batch_size = int(batch_size if batch_size is not None else desc.batch_size)
        if self.batch_size <= 0:
            raise DataError(f"batch_size must be positive, got {self.batch_size}")
        if int(chunk_size) <= 0:
            raise DataError(f"chunk_size must be positive, got {chunk_size}")
        self.chunk_size = int(chunk_size)
        self.skip_bad_lines = bool(skip_bad_lines)
        self.allow_nonfinite = bool(desc.allow_nonfinite if allow_nonfinite is None
                                    else allow_nonfinite)
        fn = _select_backend(backend)
        self.backend = "python" if fn is None else "c"
        self._fn = fn
        self.slots = [self._layout.names[i] for i in self._layout.used]
        self.skipped_lines = 0
        self.blank_lines = 0
        self.examples = 0

    def __iter__(self):
        pending, avail, bs = collections.deque(), 0, self.batch_size
        for chunk, dense_dim in self.chunks():
            pending.append([chunk, 0])
            avail += chunk.n
            while avail >= bs:
                avail -= bs
                self.examples += bs
                yield self._take(pending, bs, dense_dim)
        if avail:
            self.examples += avail
            yield self._take(pending, avail, dense_dim)

    def chunks(self, first_lines=0):
        """(parsed chunk, dense dims) for every non-empty chunk of every file, as parsed:
        the chunk's `n` lines, `vals` (per used slot, its values) and `offs` ([used slots,
        n + 1] per-line offsets into them); `dense_dim` per used slot (0 for a sparse one).
        For a consumer that walks batches itself (AsyncExecutor's compiled worker loop;
        `chunk_batch` makes one as iteration does). Bad lines raise or are skipped and
        counted (`skipped_lines`) as in iteration, blank lines counted (`blank_lines`).
        first_lines > 0: each file's first chunk is its first `first_lines` lines when they
        parse to that many examples (no blank or bad line among them), so a consumer starts
        on them without waiting for the whole chunk's parse; otherwise chunks are as
        without it."""
        L = self._layout
        parser = (_PyParser(L, self.skip_bad_lines, self.allow_nonfinite) if self._fn is None
                  else _CParser(self._fn, L, self.skip_bad_lines, self.allow_nonfinite))
        dense_dim = L.dense_dim.copy()
        self.skipped_lines = self.blank_lines = self.examples = 0
        first_bad = first_blank = None
        for path in self.files:
            for chunk, base in self._chunks(path, parser, dense_dim, int(first_lines)):
                if chunk.bad is not None:
                    error = self._error(as_source(path), base, chunk.bad, dense_dim)
                    if not self.skip_bad_lines:
                        raise error
                    self.skipped_lines += chunk.skipped
                    first_bad = first_bad or error
                if chunk.blank:
                    self.blank_lines += chunk.blank
                    first_blank = first_blank or f"{path}:{base + chunk.first_blank + 1}"
                if chunk.n:
                    yield chunk, dense_dim
        if self.skipped_lines or self.blank_lines:
            warnings.warn(self._skipped_warning(first_bad, first_blank), DataWarning,
                          stacklevel=3)

    def _skipped_warning(self, first_bad, first_blank):
        """The end-of-pass warning: how many malformed and blank lines were skipped, and
        the first of each."""
        parts = []
        if self.skipped_lines:
            parts.append(f"{self.skipped_lines} malformed line(s); the first: {first_bad}")
        if self.blank_lines:
            parts.append(f"{self.blank_lines} blank line(s); the first: {first_blank}")
        return f"MultiSlotReader skipped {'; and '.join(parts)}"

    def chunk_batch(self, chunk, a, b, dense_dim):
        """Examples [a, b) of a parsed chunk as the batch iteration would give them (a Batch;
        `chunk.origin(a, b)` alone says where they came from)."""
        return self._take(collections.deque([[chunk, a]]), b - a, dense_dim)

    def _chunks(self, path, parser, dense_dim, first_lines=0):
        """(parsed chunk, number of lines of the source before it) for each chunk of a file
        or other source (sources.py: a pipe command's output, records in memory); the
        first `first_lines` lines apart when they are that many examples (chunks())."""
        source = as_source(path)
        name = str(source)
        pieces = source.chunks(self.chunk_size)
        try:
            base, carry, head = 0, b"", first_lines
            while True:
                data = next(pieces, b"")
                if data:
                    buf = carry + data if carry else data
                    cut = buf.rfind(b"\n") + 1
                    if cut == 0:  # a line longer than the chunk: read on
                        carry = buf
                        continue
                    buf, carry = (buf, b"") if cut == len(buf) else (buf[:cut], buf[cut:])
                else:
                    buf, carry = carry, b""
                    if not buf:
                        return
                if head:
                    cut, head = _line_end(buf, head), 0
                    first = parser.parse(buf[:cut], dense_dim) if 0 < cut < len(buf) else None
                    if first is not None and first.n == first_lines and first.bad is None \
                            and not first.blank:
                        first.path, first.base = name, base
                        yield first, base
                        base += first.lines
                        buf = buf[cut:]
                chunk = parser.parse(buf, dense_dim)
                chunk.path, chunk.base = name, base
                yield chunk, base
                base += chunk.lines
                if not data:
                    return
        finally:
            pieces.close()      # a pipe left early is stopped

    def _error(self, source, base, bad, dense_dim):
        line, s, code, tok, found, expected = bad
        tok = tok.decode("utf-8", "replace")
        facts = {"name": self._layout.names[s], "s": s, "nslots": len(self._layout.names),
                 "tok": repr(tok if len(tok) <= 40 else tok[:40] + "..."),
                 "kind": _KIND_NAMES[int(self._layout.kinds[s])], "found": found,
                 "expected": expected}
        if code == DENSE_DIM:
            u = self._layout.use[s]
            facts["source"] = "its shape" if self._layout.dims[u] else "the first line"
        return DataError(_WHY[code].format(**facts), *source.locate(base + int(line) + 1))

    def _take(self, pending, n, dense_dim):
        """The next n examples from the pending chunks, as {name: LoDTensor}."""
        pieces = []
        while n:
            entry = pending[0]
            chunk, a = entry
            b = min(chunk.n, a + n)
            pieces.append((chunk, a, b))
            n -= b - a
            if b == chunk.n:
                pending.popleft()
            else:
                entry[1] = b
        L, rows = self._layout, self._layout.sparse_rows
        if len(pieces) == 1:  # the common case: views into one chunk
            c, a, b = pieces[0]
            starts, ends = c.offs[:, a].tolist(), c.offs[:, b].tolist()
            values = [v[s:e] for v, s, e in zip(c.vals, starts, ends)]
            lod = c.offs[rows, a:b + 1] - c.offs[rows, a:a + 1]
        else:
            values = [np.concatenate([c.vals[u][c.offs[u, a]:c.offs[u, b]] for c, a, b in pieces])
                      for u in range(len(L.used))]
            lens = np.concatenate([np.diff(c.offs[rows, a:b + 1], axis=1) for c, a, b in pieces],
                                  axis=1)
            lod = np.zeros((len(rows), lens.shape[1] + 1), np.int64)
            np.cumsum(lens, axis=1, out=lod[:, 1:])
        total = sum(b - a for _, a, b in pieces)
        lods = dict(zip(rows, _lod_lists(lod)))
        batch = Batch((), _origin(pieces))
        for u, (name, v) in enumerate(zip(self.slots, values)):
            dims = L.dims[u]
            if dims is None:
                batch[name] = LoDTensor(v.reshape(-1, 1), [lods[u]])
            else:
                batch[name] = LoDTensor(v.reshape((total,) + (dims or (int(dense_dim[u]),))))
        return batch

    def __repr__(self):
        return (f"MultiSlotReader({len(self.files)} file(s), batch_size={self.batch_size}, "
                f"slots={self.slots}, backend={self.backend!r})")


def _as_item(f):
    """A reader's file list entry: a path (as a str) or a Source (sources.py)."""
    return f if is_source(f) else os.fspath(f)


def describe_origin(spans):
    """'path:41-72' (or 'path:41', several joined by ', ') for a batch's origin (its
    Origins, or (path, first line, last line) tuples): how errors about a batch name it."""
    return ", ".join(f"{p}:{a}" if a == b else f"{p}:{a}-{b}" for p, a, b in spans)

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

Unused slots' counts are checked, their values skipped unread. Empty lines are skipped.
A malformed line raises DataError naming the file, the line and the fault; with
skip_bad_lines=True it is skipped, counted in `skipped_lines`, and a warning at the end of
the pass says how many were skipped and what was wrong with the first. Count 0 is allowed
(an empty sequence); Paddle rejects it.
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

CHUNK_SIZE = 2 << 20

# error codes, as in multislot_parser.c
COUNT_MISSING, COUNT_NOT_INT, COUNT_NEGATIVE, TOO_FEW, BAD_VALUE, EXTRA, DENSE_DIM = range(1, 8)
UINT64, FLOAT = 0, 1
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
    fn.argtypes = [ctypes.c_char_p, i64, p, i32, p, p, i32, p, p, p, p, i64, i32, p]
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


class _Chunk:
    """The parse of one chunk: per used slot, values and offsets[u, e] (value index where
    example e starts); `bad` = (line in chunk, slot, code, token, found, expected).
    `origin(a, b)` says which file lines examples [a, b) came from (for errors)."""
    __slots__ = ("n", "vals", "offs", "lines", "skipped", "bad", "path", "base", "_relines")

    def __init__(self, n, vals, offs, lines, skipped, bad):
        self.n, self.vals, self.offs = n, vals, offs
        self.lines, self.skipped, self.bad = lines, skipped, bad
        self.path, self.base, self._relines = None, 0, None

    def locate(self, path, base, relines):
        """Where the chunk lies: `path`, `base` lines of the file before it, and `relines`,
        a function giving each example's line index in the chunk; it is only kept (and
        called, on the first `origin`) when empty or skipped lines make examples and lines
        differ, so the common chunk costs nothing."""
        self.path, self.base = path, base
        self._relines = relines if self.lines != self.n else None

    def origin(self, a, b):
        """(path, first line, last line), 1-based, of the chunk's examples [a, b)."""
        if self._relines is None:
            return self.path, self.base + a + 1, self.base + b
        if callable(self._relines):
            self._relines = self._relines()
        return (self.path, self.base + int(self._relines[a]) + 1,
                self.base + int(self._relines[b - 1]) + 1)


class _Err(ctypes.Structure):
    _fields_ = [(f, ctypes.c_int64) for f in
                ("line", "slot", "code", "tok_start", "tok_len", "found", "expected")]


class _CParser:
    def __init__(self, fn, layout, skip):
        self.fn, self.L, self.skip = fn, layout, int(skip)
        self.per_line = [4.0] * len(layout.used)  # values per line, to size the buffers

    def parse(self, buf, dense_dim):
        L, nu = self.L, len(self.L.used)
        stride = buf.count(b"\n") + 2
        offs = np.empty((nu, stride), np.int64)
        caps = np.array([int(r * stride * 1.2) + 64 for r in self.per_line], np.int64)
        vals = [np.empty(c, _DTYPES[L.kinds[i]]) for c, i in zip(caps, L.used)]
        ptrs = (ctypes.c_void_p * max(nu, 1))(*[v.ctypes.data for v in vals])
        state, err = np.zeros(6, np.int64), _Err()
        while True:
            rc = self.fn(buf, len(buf), state.ctypes.data, len(L.kinds), L.kinds.ctypes.data,
                         L.use.ctypes.data, nu, dense_dim.ctypes.data, ptrs, caps.ctypes.data,
                         offs.ctypes.data, stride, self.skip, ctypes.byref(err))
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
        return _Chunk(n, vals, offs[:, :n + 1], int(state[1]), int(state[3]), bad)


_BLANK = np.zeros(256, bool)
_BLANK[[ord(c) for c in " \t\r\v\f\n"]] = True


def _nonblank_lines(buf):
    """Indexes of the lines of `buf` that hold more than blanks (the parsers skip the
    others)."""
    b = np.frombuffer(buf, np.uint8)
    ends = np.flatnonzero(b == 10)
    if not len(b) or b[-1] != 10:
        ends = np.append(ends, len(b))
    starts = np.concatenate([[0], ends[:-1] + 1])
    filled = np.concatenate([[0], np.cumsum(~_BLANK[b])])
    return np.flatnonzero(filled[ends] > filled[starts])


def _lod_lists(lod):
    """Rows of a 2-D offsets array as lists; equal rows share one list (in CTR data every
    sparse slot often has one id per example), which saves most of the conversion."""
    if not len(lod):
        return []
    same = (lod == lod[0]).all(axis=1).tolist()
    first = lod[0].tolist()
    return [first if eq else row.tolist() for eq, row in zip(same, lod)]


class _BadLine(Exception):
    pass


_FLOAT_RE = re.compile(rb"[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)",
                       re.IGNORECASE)


def _py_uint64(tok):
    if not tok.isdigit():
        raise ValueError
    v = int(tok)
    if v >= 1 << 63:
        if v >= 1 << 64:
            raise ValueError
        v -= 1 << 64  # the id's bits, read as int64 (as the C parser stores it)
    return v


def _py_float(tok):
    if _FLOAT_RE.fullmatch(tok) is None:
        raise ValueError
    return float(tok)


class _PyParser:
    """The fallback: the same rules as multislot_parser.c, one line at a time."""

    def __init__(self, layout, skip):
        self.L, self.skip = layout, skip
        conv = {UINT64: _py_uint64, FLOAT: _py_float}
        self.slots = [(conv[int(k)], int(u)) for k, u in zip(layout.kinds, layout.use)]

    def parse(self, buf, dense_dim):
        nu = len(self.L.used)
        lines = buf.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        vals, counts = [[] for _ in range(nu)], [[] for _ in range(nu)]
        skipped, first_bad = 0, None
        for li, line in enumerate(lines):
            toks = line.split()
            if not toks:
                continue
            try:
                row = self._line(toks, dense_dim)
            except _BadLine as e:
                if not self.skip:
                    return _Chunk(0, None, None, len(lines), 0, (li,) + e.args)
                skipped += 1
                first_bad = first_bad or (li,) + e.args
                continue
            for u, vs in enumerate(row):
                vals[u].extend(vs)
                counts[u].append(len(vs))
                if dense_dim[u] < 0:
                    dense_dim[u] = len(vs)
        n = len(counts[0]) if nu else 0
        offs = np.zeros((nu, n + 1), np.int64)
        if n:
            np.cumsum(np.array(counts, np.int64), axis=1, out=offs[:, 1:])
        with np.errstate(over="ignore"):  # 1e39 -> inf in float32, as in C
            arrays = [np.array(v, _DTYPES[self.L.kinds[i]]) for v, i in zip(vals, self.L.used)]
        return _Chunk(n, arrays, offs, len(lines), skipped, first_bad)

    def example_lines(self, buf, dense_dim):
        """The line index in `buf` of each example a parse of it yields (empty and
        skipped lines have none), checked by the same rules: the origin of a chunk's
        examples when lines were skipped."""
        dense_dim, out = dense_dim.copy(), []
        for li, line in enumerate(buf.split(b"\n")):
            toks = line.split()
            if not toks:
                continue
            try:
                row = self._line(toks, dense_dim)
            except _BadLine:
                continue
            for u, vs in enumerate(row):
                if dense_dim[u] < 0:
                    dense_dim[u] = len(vs)
            out.append(li)
        return np.array(out, np.int64)

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
                    except ValueError:
                        raise _BadLine(s, BAD_VALUE, v, 0, 0) from None
            if len(vs) < cnt:
                raise _BadLine(s, TOO_FEW, ct, len(vs), 0)
            if u >= 0:
                if dense_dim[u] > 0 and cnt != dense_dim[u]:
                    raise _BadLine(s, DENSE_DIM, ct, cnt, int(dense_dim[u]))
                row.append(out)
        if j < ntok:
            raise _BadLine(len(self.slots) - 1, EXTRA, toks[j], ntok - j, 0)
        return row


# --- the reader --------------------------------------------------------------------------

def describe_origin(spans):
    """'path:41-72' (or 'path:41', several joined by ', ') for batch_origin()'s spans."""
    return ", ".join(f"{p}:{a}" if a == b else f"{p}:{a}-{b}" for p, a, b in spans)


class MultiSlotReader:
    """Iterate batches ({used slot name: LoDTensor}) over MultiSlot files, in order.

    desc: a DataFeedDesc (or the path of one); files: paths, read one after another (a
    batch may span two files; the last batch may be short). batch_size defaults to the
    desc's. backend: "auto" (C, else Python with a warning), "c" or "python".
    Each iteration re-reads the files; `skipped_lines` and `examples` describe the last one.
    One reader per worker thread: a reader is not to be iterated by two threads at once.
    Equal LoDs in a batch may be one shared list object: treat LoD lists as read-only.
    """

    def __init__(self, desc, files, batch_size=None, skip_bad_lines=False,
                 chunk_size=CHUNK_SIZE, backend="auto"):
        if not isinstance(desc, DataFeedDesc):
            desc = DataFeedDesc(desc)
        self.desc = desc
        self._layout = _Layout(desc)
        self.files = [os.fspath(files)] if isinstance(files, (str, os.PathLike)) else \
            [os.fspath(f) for f in files]
        self.batch_size = int(batch_size if batch_size is not None else desc.batch_size)
        if self.batch_size <= 0:
            raise DataError(f"batch_size must be positive, got {self.batch_size}")
        if int(chunk_size) <= 0:
            raise DataError(f"chunk_size must be positive, got {chunk_size}")
        self.chunk_size = int(chunk_size)
        self.skip_bad_lines = bool(skip_bad_lines)
        fn = _select_backend(backend)
        self.backend = "python" if fn is None else "c"
        self._fn = fn
        self.slots = [self._layout.names[i] for i in self._layout.used]
        self.skipped_lines = 0
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

    def chunks(self):
        """(parsed chunk, dense dims) for every non-empty chunk of every file, as parsed:
        the chunk's `n` lines, `vals` (per used slot, its values) and `offs` ([used slots,
        n + 1] per-line offsets into them); `dense_dim` per used slot (0 for a sparse one).
        For a consumer that walks batches itself (AsyncExecutor's compiled worker loop;
        `chunk_batch` makes one as iteration does). Bad lines raise or are skipped and
        counted (`skipped_lines`) as in iteration."""
        L = self._layout
        parser = (_PyParser(L, self.skip_bad_lines) if self._fn is None
                  else _CParser(self._fn, L, self.skip_bad_lines))
        dense_dim = L.dense_dim.copy()
        self.skipped_lines = self.examples = 0
        first_bad = None
        for path in self.files:
            for chunk, base in self._chunks(path, parser, dense_dim):
                if chunk.bad is not None:
                    error = self._error(path, base, chunk.bad, dense_dim)
                    if not self.skip_bad_lines:
                        raise error
                    self.skipped_lines += chunk.skipped
                    first_bad = first_bad or error
                if chunk.n:
                    yield chunk, dense_dim
        if self.skipped_lines:
            warnings.warn(f"MultiSlotReader skipped {self.skipped_lines} malformed line(s); "
                          f"the first: {first_bad}", DataWarning, stacklevel=3)

    def batch_origin(self):
        """Where the batch iteration last yielded came from: [(path, first line, last
        line)], 1-based, one entry per file it spans; for messages about the batch (an op
        that failed on it names these lines)."""
        spans = []
        for chunk, a, b in getattr(self, "_pieces", ()):
            path, first, last = chunk.origin(a, b)
            if spans and spans[-1][0] == path:
                spans[-1] = (path, spans[-1][1], last)
            else:
                spans.append((path, first, last))
        return spans

    def chunk_batch(self, chunk, a, b, dense_dim):
        """Lines [a, b) of a parsed chunk as the batch iteration would give them."""
        return self._take(collections.deque([[chunk, a]]), b - a, dense_dim)

    def _chunks(self, path, parser, dense_dim):
        """(parsed chunk, number of lines of the file before it) for each chunk of a file."""
        try:
            f = open(path, "rb")
        except OSError as e:
            raise DataError(f"cannot open data file {path}: {e.strerror}") from None
        with f:
            base, carry = 0, b""
            while True:
                data = f.read(self.chunk_size)
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
                dims_before = dense_dim.copy()
                chunk = parser.parse(buf, dense_dim)
                chunk.locate(path, base, lambda buf=buf, dims=dims_before, c=chunk:
                             self._example_lines(buf, dims, c.skipped))
                yield chunk, base
                base += chunk.lines
                if not data:
                    return

    def _example_lines(self, buf, dense_dim, skipped):
        """Each example's line index in a chunk's `buf`: its non-blank lines (numpy, a few
        ms for a chunk) or, when bad lines were skipped, those the rules accept (the
        Python parser's check, line by line: only for chunks with bad lines)."""
        if skipped:
            return _PyParser(self._layout, True).example_lines(buf, dense_dim)
        return _nonblank_lines(buf)

    def _error(self, path, base, bad, dense_dim):
        line, s, code, tok, found, expected = bad
        name = self._layout.names[s]
        tok = tok.decode("utf-8", "replace")
        tok = repr(tok if len(tok) <= 40 else tok[:40] + "...")
        if code == COUNT_MISSING:
            why = (f"slot '{name}': count missing (the line ends after {s} of "
                   f"{len(self._layout.names)} slots)")
        elif code == COUNT_NOT_INT:
            why = f"slot '{name}': count {tok} is not an integer"
        elif code == COUNT_NEGATIVE:
            why = f"slot '{name}': negative count {tok}"
        elif code == TOO_FEW:
            why = f"slot '{name}': count {tok} but only {found} value(s) follow"
        elif code == BAD_VALUE:
            kind = _KIND_NAMES[int(self._layout.kinds[s])]
            why = f"slot '{name}': value {tok} is not a valid {kind}"
        elif code == EXTRA:
            why = f"{found} extra token(s) after the last slot, starting with {tok}"
        else:
            u = self._layout.use[s]
            source = "its shape" if self._layout.dims[u] else "the first line"
            why = (f"dense slot '{name}' has {found} value(s) where {expected} are expected "
                   f"(from {source})")
        return DataError(why, path, base + int(line) + 1)

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
        self._pieces = pieces
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
        batch = {}
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

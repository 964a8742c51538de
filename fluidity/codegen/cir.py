"""The code generator's small C++ IR: buffers with symbolic dims, and the context an op's
emitter writes its code through.

A `Buf` is one value a compiled segment touches: a C pointer name, its element type, its
dims as C expressions (integer literals where the program's desc knows them, names bound at
run time where it says -1), and for LoD tensors the name of its level-0 offsets.

An op's emitter (registered for its type and target in codegen/emit/) gets an `Emit`:
`e.input(slot)`, `e.attr(name)`, `e.output(slot, dims)`, `e.code(line)`,
`e.check(cond, message)`, `e.fail(reason)`; the segmenter (segment.py) stands behind it. Dims arithmetic (`mul`, `prod`) folds
literals, so a program whose shapes the desc knows compiles to constant trip counts.
"""
from ..core import dtypes
from ..core.names import EMPTY_VAR_NAME
from ..errors import ShapeError
from ..ops import common
from .dim import dim, dims, is_lit

# the C type of each dtype generated code handles
CTYPES = dtypes.C_TYPES
SIZEOF = {c: dtypes.numpy_of_ctype(c).itemsize for c in CTYPES.values()}


class NotCompilable(Exception):
    """An op (as the program uses it) has no compiled form; the message says why."""


def mul(a, b):
    """a * b as a Dim, folded when both are literals."""
    return dim(a) * dim(b)


def prod(ds):
    """The product of dims `ds` as a Dim (ops.common.prod's rule)."""
    return dim(common.prod(dims(ds)))


def c_string(s):
    """`s` as a C string literal (octal escapes outside printable ASCII): how any text read
    from a program (a name, a message naming it) reaches generated code."""
    out = []
    for byte in str(s).encode():
        ch = chr(byte)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 32 <= byte < 127 and ch != "?":
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def literal(value):
    """A Python attribute value as a C literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        r = repr(value)
        if r in ("inf", "-inf", "nan"):
            return {"inf": "INFINITY", "-inf": "-INFINITY", "nan": "NAN"}[r]
        return r + "f"
    if isinstance(value, int):
        return f"{value}LL"
    raise NotCompilable(f"attribute value {value!r} has no C literal")


def aligned(x_dims, y_dims, axis):
    """Y's dims padded with 1s to X's rank by Paddle's axis rule (ops.common's, the one
    rule); NotCompilable where they do not line up."""
    try:
        return dims(common.align_for_broadcast(dims(x_dims), dims(y_dims), axis))
    except ShapeError as e:
        raise NotCompilable(str(e)) from None


class Buf:
    """A tensor in generated code. `name` is the C pointer; `var` the program variable;
    `dims` C expressions; `lod`/`lod_len` name the level-0 offsets and their count (None
    without LoD); `lod_src` the segment input whose LoD the value carries; `rows`/`height`
    are set for SelectedRows (the row ids and the table height); `known` the values the
    generated code knows it holds (a shape op's dims as C expressions, a small constant),
    flat, or None (emit/known_values.py)."""
    __slots__ = ("name", "var", "ctype", "dims", "lod", "lod_len", "lod_src", "rows",
                 "height", "kind", "first", "last", "slot", "persistable", "written", "known")

    def __init__(self, name, var, ctype, shape, kind):
        self.name, self.var, self.ctype, self.dims, self.kind = name, var, ctype, \
            dims(shape), kind
        self.lod = self.lod_len = self.lod_src = self.rows = self.height = None
        self.first = self.last = None
        self.slot = None
        self.persistable = False
        self.written = None      # C flag set when a branch writes it (None: always written)
        self.known = None

    @property
    def ndim(self):
        return len(self.dims)

    def numel(self):
        return prod(self.dims)

    def nbytes(self):
        return mul(self.numel(), SIZEOF[self.ctype])

    def dim(self, k):
        return self.dims[k]

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Buf({self.name}: {self.var} {self.ctype}{self.dims})"


class Emit:
    """What an op's emitter sees: its inputs as Bufs, its attributes, and where to write."""

    def __init__(self, lowering, op, opdef, attrs, k):
        self._low, self.op, self.opdef, self.attrs, self.k = lowering, op, opdef, attrs, k
        self.lines = []
        self.outputs = {}
        self.touched = {}        # name -> Buf of every buffer the op's code names
        self.preconditions = []  # (C condition that must not hold, message)
        self.unset_reads = []    # Bufs read that a branch not taken leaves unset

    # -- reading ------------------------------------------------------------------------
    def attr(self, name):
        return self.attrs[name]

    def _touch(self, buf):
        if buf is not None:
            self.touched[buf.name] = buf
            if buf.rows is not None:
                self.touched[buf.rows.name] = buf.rows
        return buf

    def _read(self, name, maybe_unset):
        buf = self._touch(self._low.read(name, self.op))
        if buf is not None and buf.written and not maybe_unset and buf not in self.unset_reads:
            self.unset_reads.append(buf)         # checked before the op runs
        return buf

    def inputs(self, slot, maybe_unset=False):
        """The Bufs of input `slot`; maybe_unset: the op's code itself never reads a value a
        branch not taken left unset (else the run stops there, as the interpreter does)."""
        return [self._read(n, maybe_unset) for n in self.op.input(slot)]

    def input(self, slot, i=0, maybe_unset=False):
        names = self.op.input(slot)
        return self._read(names[i], maybe_unset) if i < len(names) else None

    def made_here(self, slot):
        """Whether every input of `slot` is a value this compiled code makes (not read from
        the scope, where it may have none)."""
        return all(self._low.made_here(n) for n in self.op.input(slot))

    def has_output(self, slot):
        return any(n != EMPTY_VAR_NAME for n in self.op.output(slot))

    def output_var(self, slot, i=0):
        names = self.op.output(slot)
        return names[i] if i < len(names) else None

    # -- writing ------------------------------------------------------------------------
    def output_rows(self, slot, n_rows, row_dims, height, ctype="float"):
        """Declare SelectedRows output `slot`: `n_rows` rows of `row_dims` (its value Buf,
        returned) with their ids in `.rows` (int64) and the table height `height`."""
        name = self.output_var(slot)
        if name is None or name == EMPTY_VAR_NAME:
            raise NotCompilable(f"output {slot} is absent")
        buf = self._low.write(name, [n_rows] + list(row_dims), ctype, self.op, self.k,
                              rows=True)
        buf.height = str(height)
        self.outputs.setdefault(slot, []).append(buf)
        self._touch(buf.rows)
        return self._touch(buf)

    def output(self, slot, dims, ctype=None, i=0, lod_from=None):
        """Declare output `slot` (#i) with `dims` (C expressions); returns its Buf. Its LoD
        is `lod_from`'s, else that of the op's `share_lod` input."""
        name = self.output_var(slot, i)
        if name is None or name == EMPTY_VAR_NAME:
            raise NotCompilable(f"output {slot} #{i} is absent")
        src = lod_from
        if src is False:                         # no LoD, whatever share_lod says
            src = None
        elif src is None and self.opdef.share_lod is not None:
            src = self.input(self.opdef.share_lod) if self.op.input(self.opdef.share_lod) \
                else None
        buf = self._low.write(name, dims, ctype or "float", self.op, self.k)
        if src is not None and src.lod is not None:
            buf.lod, buf.lod_len, buf.lod_src = src.lod, src.lod_len, src.lod_src
        self.outputs.setdefault(slot, []).append(buf)
        return self._touch(buf)

    def fused_update(self, slot):
        """(Param, LearningRate) Bufs when output `slot` is a gradient whose only use is a
        dense sgd update the op may apply itself (Param -= LearningRate * gradient, in
        place, after everything that reads Param); the sgd op is then not emitted. None
        otherwise: write the gradient as usual."""
        name = self.output_var(slot)
        if name is None or not self.has_output(slot):
            return None
        got = self._low.fused_update(name, self.k)
        if got is not None:
            self._touch(got[0])
            self._touch(got[1])
        return got

    def scratch(self, dims, ctype="float"):
        """A buffer of `dims` for this op's own use (arena bytes free after the op)."""
        return self._touch(self._low.scratch(dims, ctype, self.k))

    def code(self, line):
        self.lines.append(line)

    def check(self, cond, message):
        """A shape precondition of this op's code: when C condition `cond` (over dims and
        LoD, no computed data) holds at run time, the segment runs interpreted instead,
        where the numpy kernel handles the case or names what is wrong. Checked before the
        segment writes anything."""
        self.preconditions.append((cond, message))

    def same_dims(self, a, b):
        """Emit run-time checks that Bufs a and b have the same dims (equal literals are
        proven now; a literal pair that differs is NotCompilable)."""
        if a.ndim != b.ndim:
            raise NotCompilable(f"rank {a.ndim} vs {b.ndim}")
        for x, y in zip(a.dims, b.dims):
            if x == y:
                continue
            if is_lit(x) and is_lit(y):
                raise NotCompilable(f"dims {a.dims} vs {b.dims}")
            self.check(f"{x} != {y}", f"{self.op.type}: {a.var} and {b.var} differ in shape")

    def fail(self, reason):
        raise NotCompilable(reason)

    # -- dims and literals, at hand for emitters -------------------------------------------
    prod = staticmethod(prod)
    mul = staticmethod(mul)
    literal = staticmethod(literal)
    is_lit = staticmethod(is_lit)

    def span(self, x, y):
        """(pre, n, post): Y broadcast over X by the op's `axis` covers X's dims [a, b),
        pre/post the products before/after; checks the covered dims (run time where
        symbolic); NotCompilable when Y covers non-contiguous dims or X broadcasts."""
        if y.ndim > x.ndim:
            self.fail("X broadcast to Y")
        ya = aligned(x.dims, y.dims, self.attrs.get("axis", -1))
        cover = [k for k, d in enumerate(ya) if d != "1"]
        a, b = (cover[0], cover[-1] + 1) if cover else (x.ndim, x.ndim)
        if any(ya[k] == "1" for k in range(a, b)):
            self.fail(f"Y{y.dims} broadcasts over non-contiguous dims of X{x.dims}")
        for k in range(a, b):
            if ya[k] != x.dims[k]:
                if is_lit(ya[k]) and is_lit(x.dims[k]):
                    self.fail(f"Y{y.dims} does not broadcast to X{x.dims}")
                self.check(f"{ya[k]} != {x.dims[k]}",
                           f"{self.op.type}: Y does not broadcast to X")
        return prod(x.dims[:a]), prod(x.dims[a:b]), prod(x.dims[b:])

    def ctype_of(self, dtype):
        """The C type of a dtype code (NotCompilable for one generated code lacks)."""
        ct = CTYPES.get(dtype)
        if ct is None:
            raise NotCompilable(f"dtype {dtype} has no C type here")
        return ct

    def require_float(self, *bufs):
        for b in bufs:
            if b is not None and b.ctype != "float":
                raise NotCompilable(f"{b.var} is {b.ctype}: compiled for float32 only")

"""The code generator's small C++ IR: buffers with symbolic dims, and the context an op's
emitter writes its code through.

A `Buf` is one value a compiled segment touches: a C pointer name, its element type, its
dims as C expressions (integer literals where the program's desc knows them, names bound at
run time where it says -1), and for LoD tensors the name of its level-0 offsets.

An op's emitter (registered for its type and target in codegen/emit/) gets an `Emit`:
`e.input(slot)`, `e.attr(name)`, `e.output(slot, dims)`, `e.code(line)`,
`e.check(cond, message)`, `e.fail(reason)`; the segmenter (segment.py) stands behind it.
Dims arithmetic (`mul`, `prod`) folds literals, so a program whose shapes the desc knows
compiles to constant trip counts. Attribute values are checked against the op's schema
(`CheckedAttrs`), and text from a desc reaches the source only through `c_string`.
"""
import copy
import math
import re
from collections.abc import Mapping

from ..core import dtypes
from ..core.names import EMPTY_VAR_NAME
from ..errors import FluidityError, ProgramFormatError, ShapeError
from ..ops import common, random_stream, registry
from .dim import dim, dims, is_lit
from .refusal import NotCompilable

# the C type of each dtype generated code handles
CTYPES = dtypes.C_TYPES
SIZEOF = {c: dtypes.numpy_of_ctype(c).itemsize for c in CTYPES.values()}


# --- text from a desc in generated source ---------------------------------------------------
# A model file is data, never code: a name, a string attribute or a message built from them
# reaches generated source only as a string literal made by `c_string`, and `checked_source`
# refuses a translation unit in which anything else slipped through.
_PLAIN = frozenset(range(0x20, 0x7F)) - {ord("\\"), ord('"'), ord("?")}
_ESCAPES = {ord("\\"): "\\\\", ord('"'): '\\"'}


def c_string(text):
    """`text` as one C/C++ string literal, quotes included, safe whatever it holds.

    Its UTF-8 bytes (a lone surrogate kept as its bytes) appear as themselves only when
    printable ASCII; `\\` and `"` are escaped, and every other byte - `?` (so no trigraph
    such as `??/` can form), control characters, newline, DEL, each byte of a multi-byte
    character - is a three-digit octal escape, which no following character can extend (as
    a greedy `\\x` escape would). So the literal holds no line break, no backslash that
    could splice lines and no quote that could end it early; a `*/` or `//` inside it is
    just text."""
    out = []
    for byte in str(text).encode("utf-8", "surrogatepass"):
        if byte in _PLAIN:
            out.append(chr(byte))
        else:
            out.append(_ESCAPES.get(byte) or f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


class GeneratedSourceError(FluidityError, RuntimeError):
    """Generated source that breaks the code generator's own rules (a bug of the generator,
    never the model's fault): it is refused before any compiler sees it."""


_SPLICE = re.compile(r"\\[ \t]*\n")
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")


def checked_source(source):
    """`source` when it keeps the generator's rules - printable ASCII and newlines only, no
    backslash at the end of a line (a line splice), no trigraph - else GeneratedSourceError
    naming the first offending line. Everything from a desc is escaped by `c_string`, so a
    name that reached the source raw (a forgotten call) stops here, not in the compiler."""
    bad = re.search(r"[^\n\x20-\x7e]", source) or _SPLICE.search(source) or \
        _TRIGRAPH.search(source)
    if bad is not None:
        line = source.count("\n", 0, bad.start()) + 1
        raise GeneratedSourceError(
            f"generated source line {line} holds {bad.group()!r}, which only an unescaped "
            f"string from the program could have put there; nothing was compiled")
    return source


def mul(a, b):
    """a * b as a Dim, folded when both are literals (NotCompilable when the folded product
    does not fit: generated code never holds a literal C would wrap or refuse, and the op
    runs interpreted, which says what is too large)."""
    return dim(a) * dim(b)


def prod(ds):
    """The product of dims `ds` as a Dim (ops.common.prod's rule)."""
    return dim(common.prod(dims(ds)))


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
    `dims` C expressions; `levels` its LoD as [(offsets, their count)], level 0 the outer,
    the last indexing rows ([] without LoD), the offsets a C name (a segment input's) or an
    int64 arena Buf (a LoD an op computed, `computed_lod`); `lod`/`lod_len` name the one level
    of a value with one (None without LoD; NotCompilable for a value of more levels, so an
    emitter that reads one level refuses the others: level-aware code reads `levels`);
    `lod_src` the segment input whose LoD the value carries; `rows`/`height`
    are set for SelectedRows (the row ids and the table height); `known` the values the
    generated code knows it holds (a shape op's dims as C expressions, a small constant),
    flat, or None (emit/known_values.py)."""
    __slots__ = ("name", "var", "ctype", "dims", "levels", "lod_src", "rows",
                 "height", "kind", "first", "last", "slot", "persistable", "written", "known",
                 "cap")

    def __init__(self, name, var, ctype, shape, kind):
        self.name, self.var, self.ctype, self.dims, self.kind = name, var, ctype, \
            dims(shape), kind
        self.levels = []
        self.lod_src = self.rows = self.height = None
        self.first = self.last = None
        self.slot = None
        self.persistable = False
        self.written = None      # C flag set when a branch writes it (None: always written)
        self.known = None
        self.cap = None          # dims to reserve when `dims` change while the segment runs

    @property
    def ndim(self):
        return len(self.dims)

    @property
    def has_lod(self):
        return bool(self.levels)

    def _one_level(self, k):
        if len(self.levels) > 1:
            raise NotCompilable(f"'{self.var}' has {len(self.levels)} LoD levels (this op's "
                                "compiled form reads one)")
        return self.levels[0][k] if self.levels else None

    @property
    def lod(self):
        """The C name of the offsets of a one-level LoD (None without LoD)."""
        return self._one_level(0)

    @property
    def lod_len(self):
        """Their count, a C expression."""
        return self._one_level(1)

    @property
    def computed_lod(self):
        """Its LoD's offsets that live in arena Bufs (computed in the segment), in order."""
        return [p for p, _ in self.levels if isinstance(p, Buf)]

    def finest(self):
        """This value seen with its finest LoD level only, the one that indexes rows (for an
        emitter that reads that level of a value of more, e.g. sequence_expand's ref_level
        -1): a shallow copy, the same C buffer."""
        if len(self.levels) < 2:
            return self
        view = copy.copy(self)
        view.levels = self.levels[-1:]
        return view

    def share_lod(self, src):
        """Carry `src`'s LoD, every level of it (None: none)."""
        self.levels = list(src.levels) if src is not None else []
        self.lod_src = src.lod_src if src is not None else None

    def numel(self):
        return prod(self.dims)

    def nbytes(self):
        return mul(self.numel(), SIZEOF[self.ctype])

    def alloc_nbytes(self):
        """The bytes its arena slot reserves: `nbytes` at the bounds of dims that change
        while the segment runs (a loop pass's rows)."""
        return self.nbytes() if self.cap is None else mul(prod(self.cap), SIZEOF[self.ctype])

    def dim(self, k):
        return self.dims[k]

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"Buf({self.name}: {self.var} {self.ctype}{self.dims})"


class ArrayBuf(Buf):
    """A LoDTensorArray the segment makes (runtime/arrays.h's `TensorArray`, owned by the
    segment function, never in the arena and never leaving the segment): its elements'
    C type `elem`, their row dims `row_dims` (fixed) and `bound`, the most rows an element
    may have (a Dim the segment knows on entry; None until the first write is compiled):
    what reads of it reserve; `lod_bounds`, its entries' LoD: the most offsets each level
    has, outer first ([]: entries without LoD; None until the first write is compiled);
    `max_entries`, an int: at most that many entries, when the loop that wrote it bounds
    them on entry (trip_bound.py; any other write forgets it), else None."""
    __slots__ = ("elem", "row_dims", "bound", "lod_bounds", "max_entries")

    def __init__(self, name, var):
        super().__init__(name, var, "fl::TensorArray", [], "array")
        self.elem = self.row_dims = self.bound = self.lod_bounds = None
        self.max_entries = None

    def numel(self):
        raise NotCompilable(f"tensor array '{self.var}' has no size of its own")

    nbytes = alloc_nbytes = numel

    def row_bytes(self):
        return mul(prod(self.row_dims), SIZEOF[self.elem])

    def __repr__(self):
        return f"ArrayBuf({self.name}: {self.var} {self.elem}[?, {self.row_dims}])"


class HeldBuf(Buf):
    """A value an op makes in memory the segment function owns (runtime/beam.h's `Held`:
    bytes, dims, LoD), for a size no bound known on entry covers (beam_search_decode's
    sentences: as many steps as the loop ran). It is handed back whole as one block (the
    caller copies and frees it) and no later op of the segment reads it."""
    __slots__ = ("elem", "held_ndim")

    def __init__(self, name, var, ctype, ndim):
        super().__init__(name, var, "fl::Held", [], "held")
        self.elem, self.held_ndim = ctype, ndim

    def numel(self):
        raise NotCompilable(f"'{self.var}' has a size known only when it is made")

    nbytes = alloc_nbytes = numel

    def __repr__(self):
        return f"HeldBuf({self.name}: {self.var} {self.elem}, {self.held_ndim}-D)"


class PassRecord(Buf):
    """What a compiled `while` keeps of its passes for its `while_grad` (codegen/control.py,
    loop_grad.py), bound to the loop's StepScopes variable: `count`, the int64 [1] arena Buf
    of the number of passes; `tapes`, {variable: (ArrayBuf with one entry per pass, its
    rows' key, rank, dims when fixed)}: the values the gradient block reads as each pass
    found or left them; `outer`, {variable: Buf} the values from outside the loop it
    reads, as the loop saw them. `used`: the while_grad was compiled in the same segment
    (else the loop is segmented again, refused: the interpreter keeps step scopes)."""
    __slots__ = ("count", "tapes", "outer", "used")

    def __init__(self, var, count, tapes, outer, used=False):
        super().__init__(f"rec_{count.name}", var, "void", [], "record")
        self.count, self.tapes, self.outer, self.used = count, tapes, outer, used

    def numel(self):
        raise NotCompilable(f"'{self.var}' holds a loop's step scopes, not a tensor")

    nbytes = alloc_nbytes = numel


class TableBuf(Buf):
    """A LoDRankTable the segment makes: int64 [2, n] in the arena (row 0 the sequences'
    indices, longest first; row 1 their lengths, runtime/arrays.h), with the LoD it was made
    from (`lod`...) and that LoD's rows (`total`)."""
    __slots__ = ("total",)

    @property
    def n(self):
        return self.dims[1]


def dense_tensor(buf):
    """Whether `buf` holds a dense tensor the segment can index: a Buf present, not a tensor
    array, rank table, held value or loop record, and not SelectedRows."""
    return buf is not None and not isinstance(buf, (ArrayBuf, TableBuf, HeldBuf, PassRecord)) \
        and buf.rows is None


class CheckedAttrs(Mapping):
    """An op's attributes as its emitter reads them: each value checked against the op's
    schema and given the schema's Python type (registry.coerce_attr) before any emitter
    formats it - an INT a Python int within int32 (int64 for LONG), a FLOAT a finite float,
    a BOOL a bool, a STRING a str, lists of those - so nothing but a number the generator
    formats reaches the source from a numeric attribute. A value that is not of its type is
    NotCompilable naming op, attribute, expected and found (the op then runs interpreted,
    as the program's loader or builder would already have refused it); so is a non-finite
    float, unless the emitter asks for it by `Emit.attr(name, nonfinite=True)` and formats it
    with `literal`. An attribute the schema does not declare is absent here."""

    __slots__ = ("_opdef", "_raw", "_done")

    def __init__(self, opdef, raw):
        self._opdef, self._raw, self._done = opdef, raw, {}

    def value(self, name, nonfinite=False):
        got = self._done.get(name)
        if got is None:
            if not self._opdef.declares(name) or name not in self._raw:
                raise KeyError(name)
            try:
                got = registry.coerce_attr(self._opdef, name, self._raw[name])
            except ProgramFormatError as exc:
                raise NotCompilable(str(exc)) from None
            self._done[name] = got
        if not nonfinite and not _finite(got):
            raise NotCompilable(f"op '{self._opdef.type}': attribute '{name}' is {got!r}, "
                                "not a finite number")
        return got

    def __getitem__(self, name):
        return self.value(name)

    def __iter__(self):
        return (n for n in self._raw if self._opdef.declares(n))

    def __len__(self):
        return sum(1 for _ in self)


def _finite(v):
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list):
        return all(math.isfinite(x) for x in v if isinstance(x, float))
    return True


class Emit:
    """What an op's emitter sees: its inputs as Bufs, its attributes (checked against the op's
    schema: `CheckedAttrs`), and where to write."""

    def __init__(self, lowering, op, opdef, attrs, k):
        self._low, self.op, self.opdef, self.k = lowering, op, opdef, k
        self.attrs = attrs if isinstance(attrs, CheckedAttrs) else CheckedAttrs(opdef, attrs)
        self.lines = []
        self.outputs = {}
        self.touched = {}        # name -> Buf of every buffer the op's code names
        self.preconditions = []  # (C condition that must not hold, message)
        self.unset_reads = []    # Bufs read that a branch not taken leaves unset
        self.shares = []         # (line index, dst Buf, src Buf): copy_code's copies

    # -- reading ------------------------------------------------------------------------
    def attr(self, name, nonfinite=False):
        """Attribute `name` checked against the op's schema (`CheckedAttrs`); `nonfinite`:
        the emitter formats inf and nan itself (through `literal`)."""
        try:
            return self.attrs.value(name, nonfinite)
        except KeyError:
            raise NotCompilable(f"op '{self.op.type}' has no attribute '{name}'") from None

    def _touch(self, buf):
        if buf is not None:
            self.touched[buf.name] = buf
            if buf.rows is not None:
                self.touched[buf.rows.name] = buf.rows
            for lod in buf.computed_lod:
                self.touched[lod.name] = lod
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

    def random_state(self):
        """(Buf of the op's [key, run] state, its stream id) for a random op's emitter: the
        state is read and advanced in place by runtime/philox.h's `philox_for`, as the
        kernel advances it (core/philox.py)."""
        name = random_stream.state_var(self.op)
        if name is None:
            raise NotCompilable(f"op '{self.op.type}' has no random stream")
        return self._touch(self._low.state(name, self.op)), random_stream.stream_of(self.op)

    def made_here(self, slot):
        """Whether every input of `slot` is a value this compiled code makes (not read from
        the scope, where it may have none)."""
        return all(self._low.made_here(n) for n in self.op.input(slot))

    @property
    def at_top_level(self):
        """Whether the op is emitted at the segment's top level (not inside a loop or
        branch it compiles)."""
        return self._low.at_top_level

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
        buf.nbytes()    # as output()'s
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
        if any(is_lit(d) and int(d) < 0 for d in dims):
            raise NotCompilable(f"output {slot} would have dims {list(dims)}")
        src = lod_from
        if src is False:                         # no LoD, whatever share_lod says
            src = None
        elif src is None:
            source = self.opdef.lod_source(self.attrs)
            src = self.input(source) if source is not None and self.op.input(source) \
                else None
        buf = self._low.write(name, dims, ctype or "float", self.op, self.k)
        buf.nbytes()    # a literal size past int64 refuses the op here, not the buffer plan
        if src is not None and src.has_lod and lod_from is None:
            src = self._same_rows(buf, src)
        if src is not None and src.has_lod:
            buf.share_lod(src)
        self.outputs.setdefault(slot, []).append(buf)
        return self._touch(buf)

    def _same_rows(self, out, src):
        """`src` when output `out` has its rows, so a LoD shared from it counts rows `out`
        has (the interpreter's rule, executor/plan.py), else None. Where only run time can
        say, a run whose rows do match runs interpreted, so both paths give one LoD."""
        a, b = out.dims[:1], src.dims[:1]
        if not a or not b:
            return None
        a, b = str(a[0]), str(b[0])
        if a == b:
            return src
        if not (is_lit(a) and is_lit(b)):
            self.check(f"{a} == {b}", f"{self.op.type}: Out keeps the rows and so the LoD "
                       f"of its input")
        return None

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

    def fused_epilogue(self, slot, dims):
        """(Epilogue, {variable: Buf}, result Buf of `dims`) when output `slot` of this conv
        is only transformed per channel by the ops after it (a bias add, a frozen
        batch_norm, a relu: fusion.conv_epilogue), which the op then applies itself as it
        writes the result; None otherwise: write `slot` as usual."""
        name = self.output_var(slot)
        if name is None or not self.has_output(slot):
            return None
        got = self._low.fused_epilogue(name, dims, self.k)
        if got is not None:
            for buf in got[1].values():
                self._touch(buf)
            self.outputs.setdefault(slot, []).append(got[2])
            self._touch(got[2])
        return got

    def fused_chain(self, slot):
        """(Chain, links) when this conv's output `slot` starts a chain of 1x1 / depthwise
        convs it may run whole (fusion.conv_chain; segment.fused_chain says what a link
        holds), with each link's attributes checked as this op's are (CheckedAttrs);
        None otherwise. The op then writes the chain's result with chain_output."""
        name = self.output_var(slot)
        if name is None or not self.has_output(slot):
            return None
        got = self._low.fused_chain(name)
        if got is None:
            return None
        hit, links = got
        checked = []
        for op, bufs, epi in links:
            for buf in [*bufs.values(), *epi.values()]:
                self._touch(buf)
            opdef = registry.find(op.type)
            checked.append((op, CheckedAttrs(opdef, registry.attrs_of(opdef, op.all_attrs())),
                            bufs, epi))
        return hit, checked

    def chain_output(self, slot, hit, dims):
        """The Buf of the chain's result (segment.chain_output), as output `slot`."""
        got = self._low.chain_output(hit, dims, self.k)
        self.outputs.setdefault(slot, []).append(got)
        return self._touch(got)

    def fused_relu(self, slot, dims, lod_from=None):
        """The Buf of the relu's Out, declared with `dims` (and `lod_from`'s LoD), when
        output `slot` is read only by a relu this op may apply as it writes
        (fusion.relu_into_batch_norm; `slot` is then never written); None otherwise: write
        `slot` as usual."""
        name = self.output_var(slot)
        if name is None or not self.has_output(slot):
            return None
        got = self._low.fused_relu(name, dims, self.k)
        if got is not None:
            if lod_from is not None and lod_from.has_lod:
                got.share_lod(lod_from)
            self.outputs.setdefault(slot, []).append(got)
            self._touch(got)
        return got

    def fused_relu_grad(self, slot, dims, relu_out):
        """The Buf of relu_grad's X@GRAD, declared with `dims`, when gradient output `slot`
        is read only by a relu_grad over relu's Out `relu_out` (a variable name) that this
        op may apply as it writes (fusion.relu_grad_into_gradient; `slot` is then never
        written); None otherwise: write `slot` as usual."""
        name = self.output_var(slot)
        if name is None or not self.has_output(slot):
            return None
        got = self._low.fused_relu_grad(name, relu_out, dims, self.k)
        if got is not None:
            self.outputs.setdefault(slot, []).append(got)
            self._touch(got)
        return got

    def array_output(self, slot, elem, row_dims):
        """The ArrayBuf of tensor-array output `slot`: the one the segment holds for it (a
        write changes an array in place), else a new empty one; its elements are
        `elem`[rows, *row_dims] (NotCompilable when it holds others)."""
        name = self.output_var(slot)
        if name is None or name == EMPTY_VAR_NAME:
            raise NotCompilable(f"output {slot} is absent")
        return self._touch(self._low.write_array(name, elem, row_dims, self.op, self.k))

    def table_output(self, slot, src):
        """The TableBuf of rank-table output `slot`, made from the level-0 LoD of `src`."""
        name = self.output_var(slot)
        if name is None or name == EMPTY_VAR_NAME:
            raise NotCompilable(f"output {slot} is absent")
        return self._touch(self._low.write_table(name, src, self.op, self.k))

    def entry_bound(self, array, key, bound, current=None):
        """What the entries of tensor array `array` reserve for `key` (Segmenter.entry_bound)."""
        return self._low.entry_bound(array, key, bound, current)

    def held_output(self, slot, ctype, ndim):
        """Output `slot` as a HeldBuf of `ctype` and rank `ndim` (its size and LoD set by
        the op's runtime call)."""
        name = self.output_var(slot)
        if name is None or name == EMPTY_VAR_NAME:
            raise NotCompilable(f"output {slot} is absent")
        buf = self._low.write_held(name, ctype, ndim, self.k)
        self.outputs.setdefault(slot, []).append(buf)
        return self._touch(buf)

    def lod_output(self, what, count):
        """An int64 arena buffer for `count` LoD offsets this op computes: a level of an
        output's LoD (`Buf.levels`), alive as long as a value carries it."""
        return self._touch(self._low.lod_buf(f"({what} of op {self.k})", count, self.k))

    def runtime_dim(self, bound, setter):
        """A dim known only when this op runs (the rows of an array's entry, of a loop
        pass), at most `bound` (a Dim the segment knows on entry: the arena reserves that).
        `setter(v)` is the C call that sets C variable `v` before the op's code runs, in the
        segment function (buffers there are `name_`), returning 0 or the op's error code."""
        return self._low.runtime_dim(bound, setter, self.k)

    def bound_of(self, d):
        """The most `d` may be while the segment runs (itself unless it depends on a dim
        known only when an op runs)."""
        return self._low.bound_of(d)

    def scratch(self, dims, ctype="float"):
        """A buffer of `dims` for this op's own use (arena bytes free after the op)."""
        return self._touch(self._low.scratch(dims, ctype, self.k))

    def code(self, line):
        self.lines.append(line)

    def copy_code(self, dst, src, line):
        """`line`: C that makes `dst` (an output) an exact copy of `src` (an input of the
        same ctype and size), and that is all it writes; no other line of the op writes
        `dst` or `src`. When no op reads `src` after this one, the buffer plan gives `dst`
        the memory of `src` and the line is left out (buffers.py): a gradient passed
        through (elementwise_add_grad's dX), a reshape, cost no pass over memory."""
        self.lines.append(line)
        self.shares.append((len(self.lines) - 1, dst, src))

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

    # -- dims, literals and strings, at hand for emitters -----------------------------------
    c_string = staticmethod(c_string)
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

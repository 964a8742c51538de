"""C++ emitters of DynamicRNN's rank-table ops: lod_rank_table, max_sequence_len,
lod_tensor_to_array, array_to_lod_tensor, shrink_rnn_memory(+grad).

A rank table is an int64 [2, n] arena buffer (cir.TableBuf: indices longest first, then
lengths; runtime/arrays.h) made from a value's level-0 LoD, which it remembers, so that
array_to_lod_tensor gives its result that LoD back. A step's batch (the sequences longer
than the step) is a dim known only when the step runs (`Emit.runtime_dim`), at most the
number of sequences.
"""
from ...cir import TableBuf
from .. import register
from .arrays import array_index, input_array


def _table(e, slot="RankTable"):
    t = e.input(slot)
    if not isinstance(t, TableBuf):
        e.fail(f"{slot} '{t.var}' is not a rank table the compiled code makes")
    return t


@register("lod_rank_table", "cpu")
def lod_rank_table(e):
    """The sequences of X's level-0 LoD, longest first (a stable sort)."""
    if e.attr("level") != 0:
        e.fail(f"level {e.attr('level')} (compiled for level 0 of one-level LoD)")
    x = e.input("X")
    if x.lod is None:
        e.fail(f"X '{x.var}' has no LoD here")
    e.check(f"{x.lod_len} < 1", "lod_rank_table: X needs LoD level 0; feed a LoDTensor with "
            "sequence lengths")
    t = e.table_output("Out", x)
    e.code(f"fl::rank_table({x.lod}, {t.n}, {t});")


@register("max_sequence_len", "cpu")
def max_sequence_len(e):
    t = _table(e)
    out = e.output("Out", [1], "int64_t", lod_from=False)
    e.code(f"{out}[0] = {t.n} > 0 ? {t}[{t.n}] : 0;")


@register("lod_tensor_to_array", "cpu")
def lod_tensor_to_array(e):
    """Out[t] = step t of every sequence longer than t, in rank order."""
    x, t = e.input("X"), _table(e)
    if x.lod is None or x.lod_src != t.lod_src:
        e.fail("X does not carry the LoD its rank table was made from")
    if x.ndim < 1:
        e.fail("X has no rows")
    a = e.array_output("Out", x.ctype, x.dims[1:])
    if a.lod_bounds:
        e.fail(f"tensor array '{a.var}' holds entries with LoD")
    a.lod_bounds = []
    if a.bound is None:
        a.bound = t.n
    elif a.bound != t.n:
        e.check(f"{t.n} > {a.bound}", f"lod_tensor_to_array: {t.n} sequences, more than the "
                f"entries of '{a.var}' its compiled readers hold ({a.bound})")
    e.code(f"return fl::lod_to_array({a}, {t}, {t.n}, {x.lod}, (const char*){x}, "
           f"{a.row_bytes()}, err, {e.k});")


@register("array_to_lod_tensor", "cpu")
def array_to_lod_tensor(e):
    """The array's steps back into sequences in their original order, with the table's LoD
    (zeros where an entry is missing, as the kernel leaves them)."""
    a, t = input_array(e), _table(e)
    out = e.output("Out", [t.total] + list(a.row_dims), a.elem, lod_from=t)
    e.code(f"return fl::array_to_lod({a}, {t}, {t.n}, {t.lod}, (char*){out}, {t.total}, "
           f"{a.row_bytes()}, err, {e.k});")


@register("shrink_rnn_memory", "cpu")
def shrink_rnn_memory(e):
    """Out = X's first k rows, k the sequences longer than step I (X without LoD)."""
    x, t = e.input("X"), _table(e)
    if x.lod is not None:
        e.fail("X carries LoD (compiled for a memory of one row per sequence)")
    if x.ndim < 1:
        e.fail("X has no rows")
    _, idx_seg = array_index(e)
    rows = e.runtime_dim(x.dims[0], lambda v: f"fl::shrink_rows({t.name}_, {t.n}, {idx_seg}, "
                         f"{x.dims[0]}, &{v}, err, {e.k})")
    out = e.output("Out", [rows] + list(x.dims[1:]), x.ctype, lod_from=False)
    e.code(f"std::memcpy({out}, {x}, {out.nbytes()});")


@register("shrink_rnn_memory_grad", "cpu")
def shrink_rnn_memory_grad(e):
    """X@GRAD = zeros shaped like X, its first rows Out@GRAD's (the sequences still running
    at that step)."""
    x, g = e.input("X"), e.input("Out@GRAD")
    if x.lod is not None:
        e.fail("X carries LoD (compiled for a memory of one row per sequence)")
    if x.ndim < 1:
        e.fail("X has no rows")
    out = e.output("X@GRAD", x.dims, x.ctype, lod_from=False)
    if g is None:
        e.code(f"std::memset({out}, 0, {out.nbytes()});")
        return
    if g.ctype != x.ctype or list(map(str, g.dims[1:])) != list(map(str, x.dims[1:])):
        e.fail(f"Out@GRAD is {g.ctype}{g.dims}, X is {x.ctype}{x.dims}")
    e.check(f"{g.dims[0]} > {x.dims[0]}", "shrink_rnn_memory_grad: Out@GRAD has more rows "
            "than X")
    e.code(f"std::memcpy({out}, {g}, {g.nbytes()});")
    e.code(f"std::memset({out} + {g.numel()}, 0, {out.nbytes()} - {g.nbytes()});")


def _reorder(e, inverse):
    """Out's rows: X's rows in the table's order (Out[r] = X[index[r]]), or for the
    gradient back in the original order (Out[index[r]] = X[r]); X without LoD (one row a
    sequence: an encoder's last state)."""
    x, t = e.input("X"), _table(e)
    if x.lod is not None:
        e.fail("X carries LoD (compiled for one row per sequence)")
    if x.ndim < 1:
        e.fail("X has no rows")
    e.check(f"{t.n} > {x.dims[0]}", f"{e.op.type}: X has fewer rows than the rank table has "
            "sequences")
    out = e.output("Out", [t.n] + list(x.dims[1:]), x.ctype, lod_from=False)
    row = e.prod(x.dims[1:])
    dst, src = ("r", f"{t}[r]") if not inverse else (f"{t}[r]", "r")
    e.code(f"for (int64_t r = 0; r < {t.n}; ++r) std::memcpy({out} + ({dst}) * {row}, "
           f"{x} + ({src}) * {row}, sizeof(*{x}) * {row});")


@register("reorder_lod_tensor_by_rank", "cpu")
def reorder_lod_tensor_by_rank(e):
    _reorder(e, inverse=False)


@register("reorder_lod_tensor_by_rank_grad", "cpu")
def reorder_lod_tensor_by_rank_grad(e):
    _reorder(e, inverse=True)

"""C++ emitters of the tensor-array ops: write_to_array, read_from_array, lod_array_length,
tensor_array_to_tensor.

An array the segment makes is a runtime/arrays.h `TensorArray` the segment function owns
(cir.ArrayBuf): entries of one row size, each its own heap block, so a loop appends to it
pass by pass without a capacity fixed in advance. A read's rows are known only when it runs
(`Emit.runtime_dim`), bounded by what the array's first compiled write holds: later writes
are checked against that bound, reads of an entry never written or past the end fail with
the interpreter's message.
"""
from ....errors import ShapeError
from ....ops.common import norm_axis
from ...cir import ArrayBuf, mul, prod
from ...dim import Dim, is_lit
from .. import register
from ..literals import c_ints

INDEX_TYPES = ("int64_t", "int32_t")


def array_index(e, slot="I"):
    """(the index as op-function C, as segment-function C) of one-integer input `slot`."""
    i = e.input(slot)
    if i is None:
        e.fail(f"{slot} is absent")
    if i.ctype not in INDEX_TYPES:
        e.fail(f"{slot} '{i.var}' is {i.ctype}, not an integer")
    n = i.numel()
    if e.is_lit(n):
        if int(n) != 1:
            e.fail(f"{slot} '{i.var}' has {n} elements, not one")
    else:
        e.check(f"{n} != 1", f"{e.op.type}: {slot} does not hold one element")
    return f"(int64_t){i}[0]", f"(int64_t){i.name}_[0]"


def input_array(e, slot="X"):
    """The ArrayBuf of input `slot` (an array this segment makes and has written)."""
    a = e.input(slot)
    if not isinstance(a, ArrayBuf):
        e.fail(f"{slot} '{a.var}' is not a tensor array the compiled code makes")
    if a.bound is None:
        e.fail(f"tensor array '{a.var}' is read before the compiled code writes it")
    return a


@register("write_to_array", "cpu")
def write_to_array(e):
    """Out[I] = a copy of X and of its LoD; the array grows to I + 1 entries."""
    x = e.input("X")
    if x.ndim < 1:
        e.fail("X has no rows")
    idx, _ = array_index(e)
    a = e.array_output("Out", x.ctype, x.dims[1:])
    rows = x.dims[0]
    if a.bound is None:
        a.bound = e.entry_bound(a, "rows", e.bound_of(rows))
    elif e.bound_of(rows) != a.bound:
        e.entry_bound(a, "rows", e.bound_of(rows), a.bound)
        e.check(f"{rows} > {a.bound}", f"write_to_array: X has {rows} rows, more than the "
                f"entries of '{a.var}' its compiled readers hold ({a.bound})")
    counts = [c for _, c in x.levels]
    if a.lod_bounds is None:
        a.lod_bounds = [e.entry_bound(a, f"LoD level {level}", e.bound_of(c))
                        for level, c in enumerate(counts)]
    elif len(a.lod_bounds) != len(counts):
        e.fail(f"X has {len(counts)} LoD levels, the entries of '{a.var}' written before "
               f"{len(a.lod_bounds)}")
    else:
        for level, (c, bound) in enumerate(zip(counts, a.lod_bounds)):
            if str(e.bound_of(c)) != str(bound):
                e.entry_bound(a, f"LoD level {level}", e.bound_of(c), bound)
                e.check(f"{c} > {bound}", f"write_to_array: level {level} of X's LoD has "
                        f"{c} offsets, more than the entries of '{a.var}' its compiled "
                        f"readers hold ({bound})")
    write = f"fl::array_write({a}, {idx}, {x}, {rows}, {a.row_bytes()}, err, {e.k})"
    if not counts:
        e.code(f"return {write};")
        return
    e.code(f"if (int rc = {write}) return rc;")
    e.code(f"const int64_t* const lv[] = {{{', '.join(str(p) for p, _ in x.levels)}}};")
    e.code(f"const int64_t nlv[] = {{{', '.join(f'(int64_t)({c})' for c in counts)}}};")
    e.code(f"return fl::array_write_lod({a}, {idx}, lv, nlv, {len(counts)}, {rows}, err, "
           f"{e.k});")


@register("read_from_array", "cpu")
def read_from_array(e):
    """Out = a copy of X[I]: its rows known when it runs."""
    if e.op.input("X_W"):
        return _read_or_zeros(e)
    a = input_array(e)
    idx, idx_seg = array_index(e)
    rows = e.runtime_dim(a.bound, lambda v: f"fl::array_read_rows({a.name}_, {idx_seg}, "
                         f"&{v}, err, {e.k})")
    levels = []
    for level, bound in enumerate(a.lod_bounds or ()):    # the entry's LoD, into the arena
        count = e.runtime_dim(bound, lambda v, lv=level, b=bound: (
            f"fl::array_lod_count({a.name}_, {idx_seg}, {lv}, {b}, &{v}, err, {e.k})"))
        levels.append((e.lod_output(f"level {level}", count), count))
    out = e.output("Out", [rows] + list(a.row_dims), a.elem, lod_from=False)
    out.levels, out.lod_src = levels, None
    e.code(f"fl::array_read({a}, {idx}, {out}, {a.row_bytes()});")
    for level, (buf, _) in enumerate(levels):
        e.code(f"fl::array_read_lod({a}, {idx}, {level}, {buf});")


@register("lod_array_length", "cpu")
def lod_array_length(e):
    a = e.input("X")
    if not isinstance(a, ArrayBuf):
        e.fail(f"X '{a.var}' is not a tensor array the compiled code makes")
    out = e.output("Out", [1], "int64_t", lod_from=False)
    e.code(f"{out}[0] = {a}->size();")


def _read_or_zeros(e):
    """read_from_array's gradient form (write_to_array's gradient): a missing entry of X
    (never written, or past the end: a gradient nobody computed) reads as zeros shaped like
    X_W. An array the compiled code has not written yet takes X_W's row shape and bound."""
    a, w = e.input("X"), e.input("X_W")
    if not isinstance(a, ArrayBuf):
        e.fail(f"X '{a.var}' is not a tensor array the compiled code makes")
    if a.lod_bounds:
        e.fail(f"tensor array '{a.var}' holds entries with LoD")
    if w.lod is not None:
        e.fail("X_W carries LoD (compiled arrays hold entries without LoD)")
    if w.ndim < 1:
        e.fail("X_W has no rows")
    if a.elem is None:
        if any(str(e.bound_of(d)) != str(d) for d in w.dims[1:]):
            e.fail("X_W's row dims change while the segment runs")
        a.elem, a.row_dims = w.ctype, list(w.dims[1:])
    elif a.elem != w.ctype or list(map(str, a.row_dims)) != list(map(str, w.dims[1:])):
        e.fail(f"X holds {a.elem}[?, {a.row_dims}], X_W is {w.ctype}{w.dims}")
    w_bound = e.bound_of(w.dims[0])
    if a.bound is None:
        a.bound = w_bound
    # an entry has at most the array's bound of rows, zeros X_W's: reserve for either
    bound = a.bound if str(a.bound) == str(w_bound) else a.bound + w_bound
    idx, idx_seg = array_index(e)
    rows = e.runtime_dim(bound, lambda v: f"fl::array_read_rows_or({a.name}_, {idx_seg}, "
                         f"{w.dims[0]}, {bound}, &{v}, err, {e.k})")
    out = e.output("Out", [rows] + list(a.row_dims), a.elem, lod_from=False)
    e.code(f"fl::array_read_or_zeros({a}, {idx}, {out}, {rows}, {a.row_bytes()});")


@register("tensor_array_to_tensor", "cpu")
def tensor_array_to_tensor(e):
    """Out = the array's entries stacked (use_stack) or concatenated along `axis`; OutIndex
    their sizes along it. When the loop that filled the array bounds its entries on entry
    (trip_bound.py: a decoder's `step <= max_step_num`), Out and OutIndex are arena values
    whose joined dim is set as the segment runs (`_joined_in_arena`), so later ops read
    them in the same segment. Otherwise Out's size is as many entries as the segment wrote,
    with no bound known on entry: both are HeldBufs, handed back whole (fl::array_to_held),
    and an op that reads them runs in the next segment (Segmenter.run)."""
    a = input_array(e)
    if a.lod_bounds:
        e.fail(f"tensor array '{a.var}' holds entries with LoD")
    stack = bool(e.attr("use_stack"))
    nd = 1 + len(a.row_dims)
    try:
        axis = norm_axis(e.attr("axis"), nd + (1 if stack else 0))
    except ShapeError as exc:
        e.fail(str(exc))
    if _bounded_join(e, a):
        _joined_in_arena(e, a, axis, stack)
        return
    out = e.held_output("Out", a.elem, nd + (1 if stack else 0))
    index = e.held_output("OutIndex", "int32_t", 1) if e.has_output("OutIndex") else None
    e.code(f"const int64_t row_dims[] = {c_ints(list(a.row_dims) or [0])}; "
           f"return fl::array_to_held({a}, sizeof({a.elem}), {len(a.row_dims)}, row_dims, "
           f"{axis}, {'true' if stack else 'false'}, {out}, {index or 'nullptr'}, err, "
           f"{e.k});")


# the most bytes a bounded join may reserve when its size is a literal (else its arena
# size is checked as the segment starts: overflow-checked, and against the tensor limit)
MAX_JOIN_BYTES = 1 << 31


def _bounded_join(e, a):
    """Whether the join of ArrayBuf `a` may be an arena value: its entries have a bound
    known on entry (ArrayBuf.max_entries), the op is at the segment's top level (a later
    loop may write the array again) and a literal reservation stays within
    MAX_JOIN_BYTES."""
    if a.max_entries is None or not e.at_top_level:
        return False
    most = mul(mul(Dim.lit(a.max_entries), a.bound), a.row_bytes())
    return not is_lit(most) or int(most) <= MAX_JOIN_BYTES


def _joined_in_arena(e, a, axis, stack):
    """Out (and OutIndex) of a bounded join as arena values: `n`, the entries that hold a
    value, and their rows (their sum, concatenated along axis 0) are run-time dims set
    before the op (fl::array_join_count, which stops the run when the array holds more
    entries than its bound, and fl::array_join_rows); the op copies the entries
    (fl::join_entries)."""
    most = Dim.lit(a.max_entries)
    flag = "true" if stack else "false"
    n = e.runtime_dim(most, lambda v: f"fl::array_join_count({a.name}_, {most}, {flag}, "
                      f"&{v}, err, {e.k})")
    total = not stack and axis == 0
    rows_most = mul(most, a.bound) if total else a.bound
    rows = e.runtime_dim(rows_most, lambda v: (
        f"fl::array_join_rows({a.name}_, {flag}, {'true' if total else 'false'}, "
        f"{rows_most}, &{v}, err, {e.k})"))
    entry = [rows] + list(a.row_dims)
    if stack:
        dims = entry[:axis] + [n] + entry[axis:]
    else:
        dims = list(entry)
        if axis > 0:
            dims[axis] = mul(n, entry[axis])
    out = e.output("Out", dims, a.elem, lod_from=False)
    outer = prod(entry[:axis]) if axis > 0 else Dim.lit(1)
    row_dims = c_ints(list(a.row_dims) or [0])
    e.code(f"const int64_t row_dims[] = {row_dims};")
    e.code(f"fl::join_entries({a}, sizeof({a.elem}), {len(a.row_dims)}, row_dims, {axis}, "
           f"{outer}, (char*){out});")
    if e.has_output("OutIndex"):
        index = e.output("OutIndex", [n], "int32_t", lod_from=False)
        e.code(f"fl::join_index({a}, {flag}, {axis}, row_dims, {index});")

"""What a parameter server accepts for each variable it receives: the declaration of that
variable in its own program (the pserver program the transpiler wrote: a gradient, or a
block of one, declared with the parameter block's shape and dtype).

A received value is checked against it before it is stored, logged in the round log or
applied: its kind (LoDTensor or SelectedRows, as declared), its dtype, and its shape (a
declared -1 matches any size; `[]` and `[1]` are the same one number); for SelectedRows,
its height is the declared height and its value rows have the declared width (its row ids
lie in [0, height): the wire decoder already refuses others). A value that fails is refused
to the trainer that sent it with a `wire.BadRequest` (INVALID_ARGUMENT) naming the variable,
what was expected and what was received; nothing else changes, so the job, the other
trainers and the recovery log stay good.

Ids sent to a distributed table's prefetch block are checked the same way: an integer
tensor whose ids lie in [0, table height)."""
import numpy as np

from ..core import dtypes
from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
from .wire import BadRequest

_KINDS = {VarType.LOD_TENSOR: "LoDTensor", VarType.SELECTED_ROWS: "SelectedRows"}


class Declared:
    """One received variable's declaration: kind name, numpy dtype, dims (tuple)."""
    __slots__ = ("name", "kind", "dtype", "dims")

    def __init__(self, name, kind, dtype, dims):
        self.name, self.kind, self.dtype, self.dims = name, kind, dtype, tuple(dims)

    def describe(self):
        return f"{self.kind} {dtypes.name(self.dtype)} {list(self.dims)}"


def declarations(program, names):
    """{name: Declared} of `names` as block 0 of `program` (a ProgramView) declares them.
    A name the program does not declare as a LoDTensor or SelectedRows of a known element
    type is left out: the server then refuses every value for it."""
    block = program.global_block()
    out = {}
    for name in names:
        if not block.has_var(name):
            continue
        v = block.var(name)
        kind = _KINDS.get(v.type)
        np_dtype = dtypes.numpy_of_code(v.dtype) if v.dtype is not None else None
        if kind is None or np_dtype is None:
            continue
        out[name] = Declared(name, kind, np.dtype(np_dtype), v.shape)
    return out


def _dims_match(want, got):
    """Whether received dims `got` fit declared dims `want` (-1: any size)."""
    if len(want) == len(got):
        return all(w < 0 or w == g for w, g in zip(want, got))
    if not want:                                 # declared [] (one number): got [1]
        return tuple(got) == (1,)
    return not got and len(want) == 1 and want[0] in (1, -1)    # declared [1], got []


def _received(value):
    """(kind name, dtype, dims) of a received value, for messages and checks."""
    if isinstance(value, SelectedRows):
        v = value.value
        return "SelectedRows", getattr(v, "dtype", None), \
            (value.height,) + tuple(getattr(v, "shape", ())[1:])
    if isinstance(value, LoDTensor):
        a = value._array
        return "LoDTensor", getattr(a, "dtype", None), tuple(getattr(a, "shape", ()))
    return ("nothing" if value is None else type(value).__name__), None, ()


def check(decl, name, value, who):
    """Raise BadRequest unless `value` is what `decl` (a Declared, or None: not a variable
    this server receives values for) declares. `who` names the sender in the message."""
    kind, dtype, dims = _received(value)
    if decl is None:
        raise BadRequest(f"{who} sent '{name}', which this pserver does not declare as a "
                         f"LoDTensor or SelectedRows it receives")
    ok = kind == decl.kind and dtype == decl.dtype and _dims_match(decl.dims, dims)
    if ok and kind == "SelectedRows":
        rows = np.asarray(value.rows)
        ok = value.value.ndim >= 1 and len(rows) == value.value.shape[0]
    if not ok:
        got = kind if dtype is None else f"{kind} {dtypes.name(dtype)} {list(dims)}"
        raise BadRequest(f"{who} sent '{name}' as {got}, but this pserver declares it "
                         f"{decl.describe()}"
                         + (" ([height, row width...])" if decl.kind == "SelectedRows" else
                            "") + ": refused, nothing applied")


def check_ids(value, table, height, who):
    """Raise BadRequest unless `value` holds integer ids in [0, height) of `table`."""
    a = value._array if isinstance(value, LoDTensor) else None
    if a is None or a.dtype.kind not in "iu":
        kind, dtype, dims = _received(value)
        got = kind if dtype is None else f"{kind} {dtypes.name(dtype)} {list(dims)}"
        raise BadRequest(f"{who} asked table '{table}' for the rows of {got}: ids must be a "
                         f"LoDTensor of integers")
    if a.size and height >= 0 and (int(a.min()) < 0 or int(a.max()) >= height):
        bad = a[(a < 0) | (a >= height)].reshape(-1)[0]
        raise BadRequest(f"{who} asked table '{table}' for id {int(bad)}, outside "
                         f"[0, {height})")

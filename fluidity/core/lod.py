"""Is a LoD (level-of-detail offsets) one that kernels may index with?

Kernels - numpy ones and generated C++ alike - read rows `lod[i]` to `lod[i + 1]` of their
input without checking, so a LoD that comes from outside (a fed `LoDTensor(array, lod)`, a
`set_recursive_sequence_lengths` never held against the rows, a chunk of parsed data) is
checked once, here, before any op reads it: every level starts at 0, never decreases, ends
where the next level has sequences (the last level: at the tensor's rows), and every offset
is an integer that fits an int64. A LoD an op made from a checked one is not checked again.

`lod_problem` says what is wrong (None when nothing is); `check_fed_lod` raises the
FeedError naming the variable that the executors (interpreter, native, CUDA) raise at the
feed; `offsets_problem` checks one level given as an int64 array where a compiled step hands
offsets to generated code.
"""
import numpy as np

from ..errors import FeedError

INT64_MAX = (1 << 63) - 1
_SHOWN = 8


def _show(level):
    head = list(level[:_SHOWN])
    return f"{head}{' ...' if len(level) > _SHOWN else ''}"


def _as_offsets(level):
    """One level as an int64 array, or a str saying why it cannot be one."""
    a = np.asarray(level)
    if a.ndim != 1:
        return f"is not a list of offsets ({a.ndim}-D)"
    if a.dtype.kind in "iu":
        if a.dtype.kind == "u" and a.size and a.max() > INT64_MAX:
            return f"has an offset above 2^63-1 ({int(a.max())})"
        return a.astype(np.int64, copy=False)
    if a.size == 0:
        return np.zeros(0, np.int64)
    out = np.empty(a.size, np.int64)
    for k, v in enumerate(a.tolist()):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) and \
                not (isinstance(v, float) and v.is_integer()):
            return f"holds {v!r}, not an integer offset"
        v = int(v)
        if not -INT64_MAX - 1 <= v <= INT64_MAX:
            return f"has an offset that does not fit an int64 ({v})"
        out[k] = v
    return out


def offsets_problem(offs, rows):
    """What is wrong with one level of offsets `offs` (an int64 array) over `rows` rows (None:
    nothing); the check a compiled step makes before it hands them to generated code."""
    n = offs.shape[0]
    if n < 1:
        return "has no offsets (a level holds at least [0])"
    if offs[0] != 0:
        return f"must start at 0, got {_show(offs.tolist())}"
    if n > 1 and bool((offs[1:] < offs[:-1]).any()):
        return f"offsets must be non-decreasing, got {_show(offs.tolist())}"
    if rows is not None and offs[-1] != rows:
        return f"ends at {int(offs[-1])} but the tensor has {rows} rows"
    return None


def lod_problem(lod, rows):
    """What is wrong with LoD `lod` (levels of offsets, the last indexing `rows` rows; None
    when the rows are not known), or None when it is fit to use."""
    if not isinstance(lod, (list, tuple)):
        return f"a LoD is a list of levels, not {type(lod).__name__}"
    levels = []
    for i, level in enumerate(lod):
        a = _as_offsets(level)
        if isinstance(a, str):
            return f"LoD level {i} {a}"
        levels.append(a)
    for i, a in enumerate(levels):
        end = levels[i + 1].shape[0] - 1 if i + 1 < len(levels) else rows
        problem = offsets_problem(a, end)
        if problem is not None:
            if i + 1 < len(levels) and "ends at" in problem:
                problem = f"ends at {int(a[-1])} but level {i + 1} holds {end} sequences"
            return f"LoD level {i} {problem}"
    return None


def check_fed_lod(name, tensor):
    """Raise FeedError naming the variable when the LoD of fed LoDTensor `tensor` is not fit
    to use (lod_problem); nothing when it has none."""
    lod = tensor._lod
    if not lod:
        return
    a = tensor._array
    rows = a.shape[0] if a is not None and a.ndim else None
    if a is not None and not a.ndim:
        raise FeedError(f"feed '{name}': a 0-D tensor has no rows for a LoD to index, but it "
                        f"carries LoD {lod!r:.80}")
    problem = lod_problem(lod, rows)
    if problem is not None:
        raise FeedError(f"feed '{name}': {problem}")

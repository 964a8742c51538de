"""sequence_erase: drop given token ids from LoD sequences of ids (Fluid 1.8's op, which
``edit_distance(ignored_tokens=...)`` runs on both hypotheses and references). No gradient:
its input is integer ids."""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ShapeError
from .registry import In, OpDef, Out


class SequenceErase(OpDef):
    type = "sequence_erase"
    kind = "value"
    inputs = (In("X", no_grad=True),)
    outputs = (Out("Out"),)
    attrs = {"tokens": []}
    share_lod = None
    doc = ("Erases the ids in `tokens` from each sequence of X (a LoD int32/int64 [N, 1]); "
           "Out keeps the order of what is left, and its last LoD level counts what each "
           "sequence kept (a sequence may become empty).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 2 or xs[1] not in (1, -1):
            ctx.fail(f"X must be a 2-D LoDTensor [N, 1], got shape {list(xs)}")
        ctx.set_output("Out", [-1, 1], ctx.input_dtype("X"),
                       lod_level=ctx.input_lod_level("X"))

    @staticmethod
    def kernel(x, *, tokens):
        a = x._array
        if not x._lod:
            raise ExecutionError("sequence_erase: X needs a LoD (its sequences)")
        if a.ndim != 2 or a.shape[1] != 1:
            raise ShapeError(f"sequence_erase: X must be [N, 1], got {list(a.shape)}")
        offs = np.asarray(x._lod[-1], np.int64)
        if offs[-1] != a.shape[0]:
            raise ShapeError(f"sequence_erase: X's LoD ends at {int(offs[-1])} but X has "
                             f"{a.shape[0]} rows")
        keep = ~np.isin(a[:, 0], np.asarray(tokens, a.dtype))
        kept = np.concatenate([[0], np.cumsum(keep)])
        lod = [list(level) for level in x._lod[:-1]] + [kept[offs].tolist()]
        return LoDTensor(a[keep].reshape(-1, 1), lod)

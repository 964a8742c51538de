"""similarity_focus (Fluid 1.8): a 0/1 mask over a 4-D tensor that marks, for each chosen
slice X[:, index] along `axis` (1, 2 or 3), a greedy set of its largest cells no two of which
share a row or a column of the slice; each marked cell is marked along the whole of `axis`,
and the masks of several `indexes` are OR-ed. No gradient (Fluid has none).

The greedy pass visits the slice's cells from the largest down (ties in flat order, where
Fluid's unstable sort leaves them unspecified) and stops after min(rows, cols) marks."""
import numpy as np

from ..errors import ShapeError
from .registry import In, OpDef, Out, ints


def _focus(plane):
    """0/1 mask of `plane` [R, C]: the greedy row- and column-exclusive picks."""
    r, c = plane.shape
    mask = np.zeros((r, c), bool)
    used_r, used_c = np.zeros(r, bool), np.zeros(c, bool)
    picks = 0
    for k in np.argsort(-plane, axis=None, kind="stable"):
        i, j = divmod(int(k), c)
        if used_r[i] or used_c[j]:
            continue
        used_r[i] = used_c[j] = mask[i, j] = True
        picks += 1
        if picks == min(r, c):
            break
    return mask


class SimilarityFocus(OpDef):
    type = "similarity_focus"
    inputs = (In("X", no_grad=True),)
    outputs = (Out("Out"),)
    attrs = {"axis": 0, "indexes": ints()}
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = ("Out (X's shape, 0/1): for each index in indexes, the greedy largest "
           "row/column-exclusive cells of X[b].take(index, axis - 1), marked along axis.")

    @staticmethod
    def infer_shape(ctx):
        xs = list(ctx.input_shape("X"))
        if len(xs) != 4:
            ctx.fail(f"X must be 4-D, got {xs}")
        if ctx.attr("axis") not in (1, 2, 3):
            ctx.fail(f"axis must be 1, 2 or 3, got {ctx.attr('axis')}")
        if not ctx.attr("indexes"):
            ctx.fail("indexes can not be empty")
        ctx.set_output("Out", xs, ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, *, axis, indexes):
        if x.ndim != 4 or axis not in (1, 2, 3):
            raise ShapeError(f"similarity_focus: X must be 4-D and axis 1, 2 or 3, got "
                             f"X{list(x.shape)}, axis {axis}")
        if not indexes:
            raise ShapeError("similarity_focus: indexes can not be empty")
        bad = [i for i in indexes if not 0 <= i < x.shape[axis]]
        if bad:
            raise ShapeError(f"similarity_focus: index {bad[0]} is out of range for axis "
                             f"{axis} of X{list(x.shape)}")
        moved = np.moveaxis(x, axis, 1)            # [B, A, R, C]
        mask = np.zeros((x.shape[0],) + moved.shape[2:], bool)
        for b in range(x.shape[0]):
            for index in indexes:
                mask[b] |= _focus(moved[b, index])
        out = np.broadcast_to(mask[:, None], moved.shape)
        return np.moveaxis(out, 1, axis).astype(x.dtype)

"""ref_by_trainer_id: the one of several tensors that the running trainer owns (X[TrainerId]),
what Fluid 1.x's distribute transpiler uses to pick a trainer's parameter copy."""
import numpy as np

from ..errors import ExecutionError
from .common import is_empty
from .registry import In, OpDef, Out


class RefByTrainerId(OpDef):
    type = "ref_by_trainer_id"
    kind = "value"
    inputs = (In("X", duplicable=True), In("TrainerId", no_grad=True))
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = X[TrainerId] (a LoDTensor or SelectedRows; TrainerId an int [1] tensor)."

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shapes("X")
        if xs:
            ctx.set_output("Out", xs[0], ctx.input_dtype("X"))

    @staticmethod
    def kernel(xs, trainer_id):
        if is_empty(trainer_id):
            raise ExecutionError("ref_by_trainer_id: TrainerId has no value")
        a = np.asarray(trainer_id._array).reshape(-1)
        if a.size != 1 or a.dtype.kind not in "iu":
            raise ExecutionError(f"ref_by_trainer_id: TrainerId must be one integer, got "
                                 f"{a.dtype} of shape {list(np.shape(trainer_id._array))}")
        k = int(a[0])
        if not 0 <= k < len(xs):
            raise ExecutionError(f"ref_by_trainer_id: TrainerId {k} is out of range for "
                                 f"{len(xs)} inputs X")
        return xs[k]

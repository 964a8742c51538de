"""feed / fetch: the ops that move values between the executor's holder variables
(`feed`: FEED_MINIBATCH, `fetch`: FETCH_LIST) and the program's variables, by column."""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import FetchError
from .registry import In, OpDef, Out


def fetched_value(v):
    """What `fetch` hands back for a variable's value: the value itself (shared, not copied),
    except that an empty LoDTensor (no elements) comes back as Fluid 1.8's fetch op gives it,
    shape [0] of its dtype with its LoD kept: `multiclass_nms2` with nothing kept writes
    [0, 6], and Fluid programs compare what they fetch with `np.array([])`."""
    if v.__class__ is LoDTensor:
        a = v._array
        if a is not None and not a.size and a.ndim != 1:
            return LoDTensor(np.zeros((0,), a.dtype), v._lod)
    return v


class Feed(OpDef):
    type = "feed"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"col": 0}
    kind = "ctx"
    infer_shape = None
    doc = "Out = X[col]: the col-th fed value (shared, not copied)."

    @staticmethod
    def make_step(p):
        h, o, col = p.in_one("X"), p.out_one("Out"), p.attrs["col"]

        def step(frame, env):
            frame[o].value = frame[h].value[col]
        return step


class Fetch(OpDef):
    type = "fetch"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"col": 0}
    kind = "ctx"
    infer_shape = None
    doc = ("Out[col] = X: hand a variable's value back to the caller; an empty tensor comes "
           "back as shape [0], its LoD kept (as Fluid 1.8's fetch does).")

    @staticmethod
    def make_step(p):
        i, h, col = p.in_one("X"), p.out_one("Out"), p.attrs["col"]
        name = p.op.input("X")[0]

        def step(frame, env):
            v = frame[i].value
            if v is None:
                raise FetchError(f"fetch target '{name}' has no value after the run (no op "
                                 f"wrote it and it was not fed or initialized)")
            frame[h].value[col] = fetched_value(v)
        return step

"""Collective ops (Paddle's operators/collective): the replicas of a data-parallel run
combine a variable they each hold.

    c_allreduce_sum  Out = X summed over the replicas, on every replica   (also _max, _min,
    c_reduce_sum     Out = that sum on replica `root_id`, X elsewhere       _prod)

`CompiledProgram.with_data_parallel` inserts `c_allreduce_sum` after each parameter
gradient (transpiler/data_parallel.py); the replicas then all hold the same gradient, and
the optimizer ops run once. The ops do not reach other threads themselves: a step asks its
run environment for the run's rendezvous (`env.collective`, executor/data_parallel.py) and
hands it the value and how to combine the replicas' values; in a run that is not data
parallel there is none, and the op fails saying so rather than leave X unreduced.

Sums are taken in replica order, ((X0 + X1) + X2) + ..., as Fluid's CPU all-reduce adds
them, so every replica gets the same bits. A SelectedRows gradient (a sparse embedding's)
is summed as Fluid gathers sparse gradients: the replicas' rows and values concatenated in
replica order (rows may repeat; an update adds repeated rows up).
"""
import functools

import numpy as np

from ..core.tensor import LoDTensor, SelectedRows
from ..errors import ExecutionError
from .registry import In, OpDef, Out

# reduce type -> numpy binary function, applied left to right in replica order
REDUCERS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def combine(values, how, where):
    """The replicas' values (LoDTensors, or SelectedRows for "sum") combined in order."""
    first = values[0]
    if isinstance(first, SelectedRows):
        if how != "sum" or not all(isinstance(v, SelectedRows) for v in values):
            raise ExecutionError(f"{where}: only c_allreduce_sum combines SelectedRows, and "
                                 f"every replica must hold SelectedRows")
        heights = {v.height for v in values}
        if len(heights) != 1:
            raise ExecutionError(f"{where}: the replicas' SelectedRows have different "
                                 f"heights {sorted(heights)}")
        rows = np.concatenate([np.asarray(v.rows, dtype=np.int64) for v in values])
        value = np.concatenate([np.asarray(v.value) for v in values], axis=0)
        return SelectedRows(rows, first.height, value)
    arrays = []
    for k, v in enumerate(values):
        arr = v._array if isinstance(v, LoDTensor) else None
        if arr is None:
            raise ExecutionError(f"{where}: replica {k} holds no tensor value to combine "
                                 f"(got {type(v).__name__})")
        arrays.append(arr)
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ExecutionError(f"{where}: the replicas' tensors have different shapes "
                             f"{[list(a.shape) for a in arrays]}; each replica must compute "
                             f"the same shape")
    out = functools.reduce(REDUCERS[how], arrays)
    out = np.asarray(out, dtype=arrays[0].dtype)
    return LoDTensor(out, first._lod)


def _rendezvous(env, op_type):
    comm = env.collective
    if comm is None:
        raise ExecutionError(f"{op_type} combines a variable across the replicas of a "
                             f"data-parallel run (CompiledProgram(...).with_data_parallel); "
                             f"this run has no replicas")
    return comm


class _AllReduce(OpDef):
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"ring_id": 0, "use_calc_stream": False}
    kind = "ctx"
    share_lod = "X"
    how = None

    @classmethod
    def make_step(cls, p):
        x, out = p.in_one("X"), p.out_one("Out")
        name, how, op_type = p.op.input("X")[0], cls.how, cls.type
        key = (op_type, name, p.attrs["ring_id"])
        where = f"{op_type} of '{name}'"
        merge = functools.partial(combine, how=how, where=where)

        def step(frame, env):
            frame[out].value = _rendezvous(env, op_type).allreduce(key, frame[x].value, merge)
        return step


# one op per reduce type: c_allreduce_sum, _max, _min, _prod
_WHAT = {"sum": "the sum", "max": "the elementwise max", "min": "the elementwise min",
         "prod": "the elementwise product"}
for _how in REDUCERS:
    type(f"CAllreduce{_how.title()}", (_AllReduce,),
         {"type": f"c_allreduce_{_how}", "how": _how,
          "doc": f"Out = {_WHAT[_how]} of X over the replicas of a data-parallel run, on "
                 f"every replica."})


class CReduceSum(OpDef):
    type = "c_reduce_sum"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"ring_id": 0, "root_id": 0, "use_calc_stream": False}
    kind = "ctx"
    share_lod = "X"
    doc = "Out = the sum of X over the replicas on replica root_id; X itself on the others."

    @staticmethod
    def make_step(p):
        x, out = p.in_one("X"), p.out_one("Out")
        name, root = p.op.input("X")[0], p.attrs["root_id"]
        key = ("c_reduce_sum", name, p.attrs["ring_id"])
        merge = functools.partial(combine, how="sum", where=f"c_reduce_sum of '{name}'")

        def step(frame, env):
            frame[out].value = _rendezvous(env, "c_reduce_sum").reduce(
                key, frame[x].value, merge, root)
        return step

"""The collective ops of data-parallel training (Paddle's operators/collective), as Fluid's
collective transpiler writes them:

* startup: `c_gen_nccl_id` (Out: the id of a communicator, a RAW variable, from this rank's
  `endpoint` and the `other_endpoints`) then `c_comm_init` (X: that id; `nranks`, `rank`,
  `ring_id`), once per ring; `c_broadcast` of every parameter from rank 0;
* main: `c_allreduce_sum` of each gradient after the backward, `c_sync_calc_stream` /
  `c_sync_comm_stream` around them (streams are CUDA's: here the collective calls are
  synchronous, so the sync ops only pass X on), `c_allgather`, `c_reducescatter`,
  `c_allreduce_max/min/prod`.

The communication library is not reached from here: each step asks its run environment for
the `collective` service that `fluidity.distributed` registers (gloo through
torch.distributed; a ring of one rank needs no library), so this module imports none.
A ring is used by every executor of the process once c_comm_init made it.

Inside one process, `CompiledProgram.with_data_parallel` runs N replicas as threads
(transpiler/data_parallel.py inserts `c_allreduce_sum` after each parameter gradient, or
`c_reduce_sum` to replica 0 under the Reduce strategy): their run environment carries the
run's rendezvous (`env.collective`, executor/data_parallel.py), and the same ops combine the
replicas' values there instead of over a ring. Sums are taken in replica order,
((X0 + X1) + X2) + ..., so every replica gets the same bits; a SelectedRows gradient is summed
as Fluid gathers sparse gradients: rows and values concatenated in replica order.
"""
import functools

import numpy as np

from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import ExecutionError
from .registry import In, OpDef, Out, strings


# reduce type -> numpy binary function, applied left to right in replica / rank order
REDUCERS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def _coll(env):
    return env.service("collective")


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
    out = np.asarray(functools.reduce(REDUCERS[how], arrays), dtype=arrays[0].dtype)
    return LoDTensor(out, first._lod)


def _array(value, op, name):
    arr = getattr(value, "_array", None)
    if arr is None:
        raise ExecutionError(f"{op}: input '{name}' has no value (is it computed before "
                             f"this op?)")
    return arr


class CGenNCCLId(OpDef):
    type = "c_gen_nccl_id"
    inputs = ()
    outputs = (Out("Out"),)
    attrs = {"endpoint": "", "other_endpoints": strings(), "rank": 0}
    kind = "ctx"
    share_lod = None
    doc = ("Out = the id of a communicator over this rank's `endpoint` and the "
           "`other_endpoints` (rank 0's endpoint is where its ranks meet), for c_comm_init.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", type=VarType.RAW)

    @staticmethod
    def make_step(p):
        (o,) = p.out_idx("Out")
        endpoint, others, rank = (p.attrs["endpoint"], list(p.attrs["other_endpoints"]),
                                  int(p.attrs["rank"]))

        def step(frame, env):
            frame[o].value = _coll(env).gen_comm_id(rank, endpoint, others)
        return step


class CCommInit(OpDef):
    type = "c_comm_init"
    inputs = (In("X"),)
    outputs = ()
    attrs = {"nranks": 1, "rank": 0, "device_id": -1, "ring_id": 0}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = "Start ring `ring_id` of `nranks` ranks (this one `rank`) from the id X."

    @staticmethod
    def make_step(p):
        (x,) = p.in_idx("X")
        nranks, rank, ring = int(p.attrs["nranks"]), int(p.attrs["rank"]), int(p.attrs["ring_id"])
        if not 0 <= rank < nranks:
            raise ExecutionError(f"c_comm_init: rank {rank} is not in [0, nranks={nranks})")

        def step(frame, env):
            comm_id = frame[x].value
            if comm_id is None:
                raise ExecutionError("c_comm_init: its input X (the c_gen_nccl_id output) has "
                                     "no value")
            _coll(env).init_ring(ring, comm_id, rank, nranks)
        return step


def _same_shape(ctx):
    x = ctx.input_vars("X")[0]
    ctx.set_output("Out", list(x.shape), x.dtype, x.lod_level)


class _Collective(OpDef):
    """X -> Out through ring `ring_id`; `call(ring, array, attrs)` gives Out's array. An op
    with a `how` (the all-reduces) combines data-parallel replicas instead when the run has
    them (`env.collective`)."""
    how = None
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"ring_id": 0, "use_calc_stream": False}
    kind = "ctx"
    share_lod = "X"
    infer_shape = staticmethod(_same_shape)

    @staticmethod
    def call(ring, array, attrs):
        raise NotImplementedError

    @classmethod
    def make_step(cls, p):
        (x,), (o,) = p.in_idx("X"), p.out_idx("Out")
        attrs, ring_id, op = dict(p.attrs), int(p.attrs["ring_id"]), cls.type
        name = p.op.input("X")[0]
        key = (op, name, ring_id)
        merge = functools.partial(combine, how=cls.how, where=f"{op} of '{name}'") \
            if cls.how else None

        def step(frame, env):
            value = frame[x].value
            replicas = env.collective
            if replicas is not None and merge is not None:
                frame[o].value = replicas.allreduce(key, value, merge)
                return
            arr = _array(value, op, "X")
            out = cls.call(_coll(env).ring(ring_id, op), arr, attrs)
            frame[o].value = LoDTensor(out, cls.out_lod(value))
        return step

    @staticmethod
    def out_lod(value):
        return list(getattr(value, "_lod", []) or [])


def _allreduce(red):
    class AllReduce(_Collective):
        type = f"c_allreduce_{red}"
        how = red
        doc = (f"Out = the element-wise {red} of X over the ranks of ring `ring_id`, or over "
               f"the replicas of a data-parallel run (every rank / replica gets it).")

        @staticmethod
        def call(ring, array, attrs):
            return ring.allreduce(array, red)
    AllReduce.__name__ = AllReduce.__qualname__ = f"CAllReduce{red.capitalize()}"
    return AllReduce


CAllReduceSum, CAllReduceMax, CAllReduceMin, CAllReduceProd = (
    _allreduce(r) for r in ("sum", "max", "min", "prod"))


class CReduceSum(OpDef):
    type = "c_reduce_sum"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    attrs = {"ring_id": 0, "root_id": 0, "use_calc_stream": False}
    kind = "ctx"
    share_lod = "X"
    infer_shape = staticmethod(_same_shape)
    doc = ("Out = the sum of X over the replicas of a data-parallel run on replica root_id; "
           "X itself on the others.")

    @staticmethod
    def make_step(p):
        x, out = p.in_one("X"), p.out_one("Out")
        name, root = p.op.input("X")[0], p.attrs["root_id"]
        key = ("c_reduce_sum", name, p.attrs["ring_id"])
        merge = functools.partial(combine, how="sum", where=f"c_reduce_sum of '{name}'")

        def step(frame, env):
            replicas = env.collective
            if replicas is None:
                raise ExecutionError("c_reduce_sum combines a variable across the replicas of "
                                     "a data-parallel run (CompiledProgram(...)."
                                     "with_data_parallel); this run has no replicas")
            frame[out].value = replicas.reduce(key, frame[x].value, merge, root)
        return step


class CBroadcast(_Collective):
    type = "c_broadcast"
    attrs = {"ring_id": 0, "root": 0, "use_calc_stream": False}
    doc = "Out = rank `root`'s X on every rank of ring `ring_id`."

    @staticmethod
    def call(ring, array, attrs):
        return ring.broadcast(array, int(attrs["root"]))


class CAllGather(_Collective):
    type = "c_allgather"
    attrs = {"ring_id": 0, "nranks": 1, "use_calc_stream": False}
    share_lod = None
    doc = "Out = the X of every rank of ring `ring_id`, concatenated in rank order (axis 0)."

    @staticmethod
    def infer_shape(ctx):
        x, n = ctx.input_vars("X")[0], int(ctx.attr("nranks"))
        shape = list(x.shape)
        if shape and shape[0] > 0:
            shape[0] *= n
        ctx.set_output("Out", shape, x.dtype)

    @staticmethod
    def call(ring, array, attrs):
        _check_nranks("c_allgather", ring, attrs)
        return ring.allgather(array)

    @staticmethod
    def out_lod(value):
        return []


class CReduceScatter(_Collective):
    type = "c_reducescatter"
    attrs = {"ring_id": 0, "nranks": 1, "use_calc_stream": False}
    share_lod = None
    doc = ("Out = this rank's share (rows rank*n/nranks .. (rank+1)*n/nranks) of the sum of "
           "X over ring `ring_id`.")

    @staticmethod
    def infer_shape(ctx):
        x, n = ctx.input_vars("X")[0], int(ctx.attr("nranks"))
        shape = list(x.shape)
        if shape and shape[0] > 0:
            shape[0] //= n
        ctx.set_output("Out", shape, x.dtype)

    @staticmethod
    def call(ring, array, attrs):
        _check_nranks("c_reducescatter", ring, attrs)
        if not array.ndim or array.shape[0] % ring.nranks:
            raise ExecutionError(f"c_reducescatter: X's first dimension "
                                 f"{array.shape[:1]} does not split over {ring.nranks} ranks")
        return ring.reducescatter(array)

    @staticmethod
    def out_lod(value):
        return []


def _check_nranks(op, ring, attrs):
    if int(attrs["nranks"]) != ring.nranks:
        raise ExecutionError(f"{op}: attribute nranks={attrs['nranks']} but ring "
                             f"{attrs['ring_id']} has {ring.nranks} rank(s)")


class CSyncCalcStream(OpDef):
    type = "c_sync_calc_stream"
    inputs = (In("X"),)
    outputs = (Out("Out"),)
    kind = "value"
    infer_shape = staticmethod(_same_shape)
    doc = ("Wait for the computation stream (CUDA's): here computation and collectives are "
           "synchronous, so Out = X.")

    @staticmethod
    def kernel(x):
        return x


class CSyncCommStream(OpDef):
    type = "c_sync_comm_stream"
    inputs = (In("X", duplicable=True),)
    outputs = (Out("Out", duplicable=True),)
    attrs = {"ring_id": 0}
    kind = "ctx"
    share_lod = None
    doc = ("Wait for ring `ring_id`'s communication stream: the collective calls here return "
           "when done, so Out = X.")

    @staticmethod
    def infer_shape(ctx):
        for i, x in enumerate(ctx.input_vars("X")):
            ctx.set_output("Out", list(x.shape), x.dtype, x.lod_level, i=i)

    @staticmethod
    def make_step(p):
        pairs = list(zip(p.in_idx("X"), p.out_idx("Out")))

        def step(frame, env):
            for i, o in pairs:
                if i != o:
                    frame[o].value = frame[i].value
        return step


def reduce_local(arrays, red):
    """The reduction a ring computes, over a list of arrays (a one-rank ring's and the tests'
    reference)."""
    fn = REDUCERS[red]
    out = np.array(arrays[0], copy=True)
    for a in arrays[1:]:
        fn(out, a, out=out)
    return out

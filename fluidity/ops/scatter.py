"""Index-driven ops of Fluid 1.x: gather_nd, scatter, scatter_nd_add (and their gradients),
unique, unique_with_counts, shard_index, expand_as.

Indices are checked against the dims they index (ExecutionError naming the op); Out is
always a new array.
"""
import numpy as np

from ..core import dtypes
from ..errors import ExecutionError
from .common import untile
from .registry import In, OpDef, Out


def _nd_index(x_shape, index, op):
    """The tuple numpy indexes X with for an Index whose last dim addresses X's leading
    dims (negative entries count from the end)."""
    index = np.asarray(index).astype(np.int64)
    k = index.shape[-1]
    if k > len(x_shape):
        raise ExecutionError(f"{op}: Index's last dim {k} exceeds X's rank {len(x_shape)}")
    cols = []
    for j in range(k):
        c = index[..., j]
        dim = x_shape[j]
        if ((c < -dim) | (c >= dim)).any():
            bad = int(c[(c < -dim) | (c >= dim)][0])
            raise ExecutionError(f"{op}: index {bad} is out of range for dim {j} of size {dim}")
        cols.append(np.where(c < 0, c + dim, c))
    return tuple(cols)


def _nd_at(x, index, op):
    """(array, index tuple) addressing X's slices the rows of Index pick: `array` is X, or,
    for an Index whose last dim is 0 (each row picks the whole X, as in Fluid), a view of X
    with a leading axis of 1 that every row indexes at 0. Writes through the view reach X."""
    index = np.asarray(index)
    if index.shape and index.shape[-1] == 0:
        return x[None], (np.zeros(index.shape[:-1], np.int64),)
    return x, _nd_index(x.shape, index, op)


def _row_ids(ids, n, op):
    ids = np.asarray(ids).reshape(-1).astype(np.int64)
    bad = ids[(ids < -n) | (ids >= n)]
    if bad.size:
        raise ExecutionError(f"{op}: id {int(bad[0])} is out of range for {n} rows")
    return np.where(ids < 0, ids + n, ids)


# --- gather_nd -------------------------------------------------------------------------------
class GatherNd(OpDef):
    type = "gather_nd"
    inputs = (In("X"), In("Index", no_grad=True))
    outputs = (Out("Out"),)
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = ("Out[i...] = X[Index[i..., :]]: Index's last dim addresses X's leading dims; "
           "Out's shape is Index.shape[:-1] + X.shape[Index.shape[-1]:].")

    @staticmethod
    def infer_shape(ctx):
        xs, ids = ctx.input_shape("X"), ctx.input_shape("Index")
        if not ids or (ids[-1] >= 0 and ids[-1] > len(xs)):
            # Fluid 1.8's words (its programs match them)
            ctx.fail(f"Input(Index).shape[-1] should be no greater than Input(X).rank: "
                     f"Index's last dim must address at most X's {len(xs)} dims")
        k = ids[-1] if ids[-1] >= 0 else 0
        ctx.set_output("Out", ids[:-1] + xs[k:], ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, index):
        a, at = _nd_at(x, index, "gather_nd")
        return a[at].copy()

    grad = staticmethod(lambda g: g.default())


class GatherNdGrad(OpDef):
    type = "gather_nd_grad"
    inputs = (In("X"), In("Index"), In("Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, index, out, dout):
        dx = np.zeros_like(x)
        a, at = _nd_at(dx, index, "gather_nd_grad")
        np.add.at(a, at, dout)
        return dx


# --- scatter ---------------------------------------------------------------------------------
class Scatter(OpDef):
    type = "scatter"
    share_lod = None
    lod_outputs = ("Out",)
    inputs = (In("X"), In("Ids", no_grad=True), In("Updates"))
    outputs = (Out("Out"),)
    attrs = {"overwrite": True}
    doc = ("Out = X with rows Ids replaced by the rows of Updates (overwrite; the last "
           "duplicate wins), or set to the sum of their Updates rows (overwrite=False).")

    @staticmethod
    def infer_shape(ctx):
        xs, us = ctx.input_shape("X"), ctx.input_shape("Updates")
        if len(us) != len(xs) or [d for d in us[1:]] != [d for d in xs[1:]]:
            if all(a >= 0 and b >= 0 for a, b in zip(us[1:], xs[1:])):
                ctx.fail(f"Updates {us} must be X's rows {xs[1:]}")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, ids, updates, *, overwrite):
        ids = _row_ids(ids, x.shape[0], "scatter")
        out = x.copy()
        if overwrite:
            out[ids] = updates
        else:
            out[ids] = 0
            np.add.at(out, ids, updates)
        return out

    grad = staticmethod(lambda g: g.op(
        "scatter_grad", {"Ids": g.input("Ids"), "Updates": g.input("Updates"),
                         "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X"), "Updates@GRAD": g.input_grad("Updates")}, g.attrs()))


class ScatterGrad(OpDef):
    type = "scatter_grad"
    inputs = (In("Ids"), In("Updates"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Updates@GRAD", dispensable=True))
    attrs = Scatter.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(ids, updates, dout, *, overwrite):
        ids = _row_ids(ids, dout.shape[0], "scatter_grad")
        dx = dout.copy()
        dx[ids] = 0
        if overwrite:      # only the last write of a row reaches Out
            last = {int(r): i for i, r in enumerate(ids)}
            du = np.zeros_like(updates)
            for rrow, i in last.items():
                du[i] = dout[rrow]
        else:
            du = dout[ids].astype(updates.dtype, copy=False)
        return dx, du


class ScatterNdAdd(OpDef):
    type = "scatter_nd_add"
    inputs = (In("X"), In("Index", no_grad=True), In("Updates"))
    outputs = (Out("Out"),)
    share_lod = "X"
    lod_outputs = ("Out",)
    doc = ("Out = X, then Out[Index[i..., :]] += Updates[i...] for every i (duplicates "
           "add up).")

    @staticmethod
    def infer_shape(ctx):
        # Fluid 1.8's checks, in its words (programs match them): Updates must be
        # Index.shape[:-1] + X.shape[Index.shape[-1]:]
        xs, ids, us = (ctx.input_shape(s) for s in ("X", "Index", "Updates"))
        if len(ids) < 2:
            ctx.fail(f"The rank of Input(Index) should be greater than 1, got {ids}")
        if ids[-1] >= 0 and ids[-1] > len(xs):
            ctx.fail(f"Input(Index).shape[-1] should be no greater than Input(X).rank: "
                     f"Index {ids} addresses more than the {len(xs)} dims of X {xs}")
        if ids[-1] >= 0:
            want = ids[:-1] + xs[ids[-1]:]
            if len(want) != len(us) or any(a >= 0 and b >= 0 and a != b
                                           for a, b in zip(want, us)):
                ctx.fail(f"Updates has wrong shape: {us}, where Index {ids} and X {xs} "
                         f"need {want}")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, index, updates):
        out = x.copy()
        a, at = _nd_at(out, index, "scatter_nd_add")
        np.add.at(a, at, updates)
        return out

    grad = staticmethod(lambda g: g.op(
        "scatter_nd_add_grad", {"Index": g.input("Index"), "Updates": g.input("Updates"),
                                "Out@GRAD": g.output_grad("Out")},
        {"X@GRAD": g.input_grad("X"), "Updates@GRAD": g.input_grad("Updates")}))


class ScatterNdAddGrad(OpDef):
    type = "scatter_nd_add_grad"
    inputs = (In("Index"), In("Updates"), In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("Updates@GRAD", dispensable=True))
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(index, updates, dout):
        a, at = _nd_at(dout, index, "scatter_nd_add_grad")
        du = a[at]
        return dout.copy(), du.astype(updates.dtype, copy=False)


# --- unique ----------------------------------------------------------------------------------
def _unique(x, dtype):
    """(values in first-occurrence order, index of each element's value, counts)."""
    flat = x.reshape(-1)
    vals, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                             return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    it = dtypes.to_numpy(dtype)
    return vals[order], rank[inverse.reshape(-1)].astype(it), counts[order].astype(it)


class Unique(OpDef):
    type = "unique"
    inputs = (In("X", no_grad=True),)
    outputs = (Out("Out"), Out("Index"))
    attrs = {"dtype": dtypes.VarType.INT32}
    share_lod = None
    doc = ("Out = the distinct elements of 1-D X in order of first occurrence; "
           "Index[i] = where X[i] is in Out.")

    @staticmethod
    def infer_shape(ctx):
        ctx.set_output("Out", [-1], ctx.input_dtype("X"))
        ctx.set_output("Index", [-1], ctx.attr("dtype"))

    @staticmethod
    def kernel(x, *, dtype):
        vals, index, _ = _unique(x, dtype)
        return vals, index


class UniqueWithCounts(OpDef):
    type = "unique_with_counts"
    inputs = (In("X", no_grad=True),)
    outputs = (Out("Out"), Out("Index"), Out("Count"))
    attrs = {"dtype": dtypes.VarType.INT32}
    share_lod = None
    doc = "unique, and Count[j] = how often Out[j] occurs in X."

    @staticmethod
    def infer_shape(ctx):
        Unique.infer_shape(ctx)
        ctx.set_output("Count", [-1], ctx.attr("dtype"))

    @staticmethod
    def kernel(x, *, dtype):
        return _unique(x, dtype)


# --- shard_index, expand_as ------------------------------------------------------------------
class ShardIndex(OpDef):
    type = "shard_index"
    inputs = (In("X", no_grad=True),)
    outputs = (Out("Out"),)
    attrs = {"index_num": 0, "nshards": 0, "shard_id": 0, "ignore_value": -1}
    doc = ("Out = X - shard_id * shard_size where X falls in shard `shard_id` (shard_size = "
           "ceil(index_num / nshards)), else ignore_value.")

    @staticmethod
    def infer_shape(ctx):
        if ctx.attr("nshards") <= 0 or not 0 <= ctx.attr("shard_id") < ctx.attr("nshards"):
            ctx.fail(f"needs nshards > 0 and 0 <= shard_id < nshards, got nshards="
                     f"{ctx.attr('nshards')}, shard_id={ctx.attr('shard_id')}")
        ctx.share("X", "Out")

    @staticmethod
    def kernel(x, *, index_num, nshards, shard_id, ignore_value):
        if ((x < 0) | (x >= index_num)).any():
            raise ExecutionError(f"shard_index: ids must be in [0, {index_num})")
        size = (index_num + nshards - 1) // nshards
        return np.where(x // size == shard_id, x - shard_id * size, ignore_value).astype(x.dtype)


class ExpandAs(OpDef):
    type = "expand_as"
    inputs = (In("X"), In("target_tensor", no_grad=True))
    outputs = (Out("Out"),)
    share_lod = None
    doc = "Out = X tiled so that its shape is target_tensor's (each dim a multiple of X's)."

    @staticmethod
    def infer_shape(ctx):
        xs, ts = ctx.input_shape("X"), ctx.input_shape("target_tensor")
        if len(xs) != len(ts):
            ctx.fail(f"X{xs} and target_tensor{ts} must have the same rank")
        ctx.set_output("Out", ts, ctx.input_dtype("X"))

    @staticmethod
    def kernel(x, target):
        reps = []
        for a, b in zip(x.shape, target.shape):
            if a == 0 or b % a:
                raise ExecutionError(f"expand_as: target dims {list(target.shape)} are not "
                                     f"multiples of X's {list(x.shape)}")
            reps.append(b // a)
        return np.tile(x, reps)

    grad = staticmethod(lambda g: g.op(
        "expand_as_grad", {"X": g.input("X"), "target_tensor": g.input("target_tensor"),
                           "Out@GRAD": g.output_grad("Out")}, {"X@GRAD": g.input_grad("X")}))


class ExpandAsGrad(OpDef):
    type = "expand_as_grad"
    inputs = (In("X"), In("target_tensor"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, target, dout):
        return untile(dout, x.shape, [b // a for a, b in zip(x.shape, dout.shape)])

"""Ops that make or consume a random seed held in a tensor: `seed` (a fixed or fresh seed as a
[1] int32 tensor, what dropout's Seed input reads) and `shuffle_batch` (a permutation of the
rows of X, seeded by its Seed input, writing the next seed to SeedOut and the permutation to
ShuffleIdx, whose gradient routes Out@GRAD back through the permutation).

The permutation is the argsort of 64-bit keys from the op's Philox stream (core/philox.py:
row i's key from words 2i and 2i + 1, SeedOut from word 2n), not libstdc++'s shuffle over
minstd_rand0 that Fluid's kernel uses: a given seed gives a fixed, reproducible order, but
not the order Paddle would give for it; nothing in Fluid's API promises that order."""
import os

import numpy as np

from ..core import philox
from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ShapeError
from .common import is_empty
from .registry import In, OpDef, Out


class Seed(OpDef):
    type = "seed"
    inputs = ()
    outputs = (Out("Out"),)
    attrs = {"seed": 0}
    share_lod = None
    doc = "Out = [seed] (int32), or a fresh random seed when seed is 0."

    @staticmethod
    def infer_shape(ctx):
        from ..core.dtypes import VarType
        ctx.set_output("Out", [1], VarType.INT32)

    @staticmethod
    def kernel(*, seed):
        if seed == 0:
            seed = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
        return np.array([seed], np.int32)


class ShuffleBatch(OpDef):
    type = "shuffle_batch"
    kind = "value"
    inputs = (In("X"), In("Seed", no_grad=True))
    outputs = (Out("Out"), Out("ShuffleIdx"), Out("SeedOut"))
    attrs = {"startup_seed": 0}
    doc = ("X viewed as [N_1 * ... * N_k, D] rows; Out[ShuffleIdx[i]] = row i for a random "
           "permutation ShuffleIdx (int64) drawn from Seed (startup_seed while Seed holds no "
           "value); SeedOut = the next seed (int64 [1]).")

    @staticmethod
    def infer_shape(ctx):
        from ..core.dtypes import VarType
        ctx.share("X", "Out")
        ctx.set_output("ShuffleIdx", [-1], VarType.INT64)
        if ctx.has_input("Seed"):
            ctx.set_output("SeedOut", ctx.input_shape("Seed"), VarType.INT64)
        else:
            ctx.set_output("SeedOut", [1], VarType.INT64)

    random_stream = "Out"

    @classmethod
    def prepare(cls, attrs, outputs, stream):
        startup_seed = attrs["startup_seed"]
        return lambda x, seed, state: cls.shuffle(x, seed, state, startup_seed, stream)

    @staticmethod
    def shuffle(x, seed, state, startup_seed, stream):
        if is_empty(x):
            raise ExecutionError("shuffle_batch: Input(X) has no value")
        a = x._array
        if a.ndim < 1:
            raise ShapeError("shuffle_batch: X must have at least one dim, got a scalar")
        rows = a.reshape(-1, a.shape[-1]) if a.ndim > 1 else a.reshape(-1, 1)
        s = startup_seed if is_empty(seed) else int(np.asarray(seed._array).reshape(-1)[0])
        key, ks, run = philox.key_and_run(s, state, stream)
        n = rows.shape[0]
        w = philox.words(2 * n + 1, key, ks, run)
        sort_keys = (w[:2 * n:2].astype(np.uint64) << np.uint64(32)) | w[1:2 * n:2]
        idx = np.argsort(sort_keys, kind="stable").astype(np.int64)
        out = np.empty_like(rows)
        out[idx] = rows
        nxt = np.array([int(w[-1] & 0x7FFFFFFF) or 1], np.int64)
        return LoDTensor(out.reshape(a.shape), x._lod), LoDTensor(idx), LoDTensor(nxt)

    @staticmethod
    def grad(g):
        g.op("shuffle_batch_grad", {"ShuffleIdx": g.output("ShuffleIdx"),
                                    "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X")}, g.attrs())


class ShuffleBatchGrad(OpDef):
    type = "shuffle_batch_grad"
    inputs = (In("ShuffleIdx"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = {"startup_seed": 0}
    infer_shape = None
    share_lod = "Out@GRAD"

    @staticmethod
    def kernel(idx, dout):
        rows = dout.reshape(-1, dout.shape[-1]) if dout.ndim > 1 else dout.reshape(-1, 1)
        if idx.size != rows.shape[0]:
            raise ShapeError(f"shuffle_batch_grad: ShuffleIdx has {idx.size} entries for "
                             f"{rows.shape[0]} rows of Out@GRAD")
        return rows[idx.reshape(-1)].reshape(dout.shape)

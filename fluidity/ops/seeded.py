"""Ops that make or consume a random seed held in a tensor: `seed` (a fixed or fresh seed as a
[1] int32 tensor, what dropout's Seed input reads) and `shuffle_batch` (a permutation of the
rows of X, seeded by its Seed input, writing the next seed to SeedOut and the permutation to
ShuffleIdx, whose gradient routes Out@GRAD back through the permutation).

The permutation is numpy's (PCG64 seeded from the seed), not libstdc++'s shuffle over
minstd_rand0 that Fluid's kernel uses: a given seed gives a fixed, reproducible order, but
not the order Paddle would give for it; nothing in Fluid's API promises that order."""
import os

import numpy as np

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


def _generator(seed):
    return np.random.Generator(np.random.PCG64(int(seed) % (1 << 64)))


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

    @staticmethod
    def kernel(x, seed, *, startup_seed):
        if is_empty(x):
            raise ExecutionError("shuffle_batch: Input(X) has no value")
        a = x._array
        if a.ndim < 1:
            raise ShapeError("shuffle_batch: X must have at least one dim, got a scalar")
        rows = a.reshape(-1, a.shape[-1]) if a.ndim > 1 else a.reshape(-1, 1)
        s = startup_seed if is_empty(seed) else int(np.asarray(seed._array).reshape(-1)[0])
        gen = _generator(s)
        idx = gen.permutation(rows.shape[0]).astype(np.int64)
        out = np.empty_like(rows)
        out[idx] = rows
        nxt = np.array([int(gen.integers(0, 1 << 31))], np.int64)
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

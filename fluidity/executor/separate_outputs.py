"""Update ops whose program names outputs apart from the inputs they update.

An op declaring `out_of` (the optimizer update ops: ParamOut of Param, Moment1Out of
Moment1, ...) updates those inputs in place, and the optimizers build it with each output
naming its input. A program may name other variables for them (Paddle's op tests do): then
the op reads the inputs and writes the outputs, leaving the inputs as they were. The step
here runs the kernel on copies of those inputs and binds the outputs to the copies. Where
the op writes only some rows (`OpDef.rows_written`: a lazy update from a sparse gradient),
an output variable that already holds an array of that shape keeps its other rows, as
Paddle's kernels write only those rows into the output's buffer.
"""
import numpy as np

from ..core.names import EMPTY_VAR_NAME
from ..core.tensor import LoDTensor


def separate_pairs(op, opdef):
    """[(input slot, output slot)] of an `out_of` op whose output names another variable
    than its input."""
    pairs = []
    for out, src in getattr(opdef, "out_of", {}).items():
        o = [n for n in op.output(out) if n != EMPTY_VAR_NAME]
        i = [n for n in op.input(src) if n != EMPTY_VAR_NAME]
        if o and i and o != i:
            pairs.append((src, out))
    return pairs


def _copy(holder):
    if type(holder) is LoDTensor and holder._array is not None:
        return LoDTensor(np.array(holder._array, copy=True), holder._lod)
    return holder


def wrap(prep, step, pairs):
    """`step` (the op's prepared step) run on copies of the inputs of `pairs`, its outputs
    bound to the copies, the inputs left as they were."""
    opdef, attrs = prep.opdef, prep.attrs
    slots = [(src, out, prep.in_one(src), prep.out_one(out)) for src, out in pairs]
    names = [s.name for s in opdef.inputs]
    ins_at = [prep.in_one(n) for n in names]
    rows_written = getattr(opdef, "rows_written", None)

    def run(F, env):
        inputs = {n: F[i].value if i is not None else None for n, i in zip(names, ins_at)}
        partial = rows_written(attrs, inputs) if rows_written is not None else None
        before = {o: F[o].value for _s, _o, _i, o in slots}
        saved = {}
        for _src, _out, i, _o in slots:
            if i not in saved:
                saved[i] = F[i].value
                F[i].value = _copy(saved[i])
        step(F, env)
        for i, held in saved.items():
            F[i].value = held
        if partial is None:
            return
        rows, partial_slots = partial
        for src, _out, _i, o in slots:
            prev, got = before[o], F[o].value
            if src not in partial_slots or type(prev) is not LoDTensor or \
                    type(got) is not LoDTensor or prev._array is None or got._array is None \
                    or prev._array.shape != got._array.shape \
                    or prev._array.dtype != got._array.dtype:
                continue
            keep = np.array(prev._array, copy=True)
            keep[rows] = got._array[rows]
            got._array = keep
    return run

"""Which random stream an op draws from: the facts about random ops that the interpreter's
plans and the code generator share (core/philox.py holds the generator and the mapping).

An op that draws random numbers sets `random_stream` on its OpDef to the output slot whose
first variable names its stream. Its kernel is then prepared with that stream's id
(`prepare(cls, attrs, outputs, stream)`) and takes one more input after its own: the
op's [key, run] state (an int64 [2] array, advanced in place by a run with seed 0), held in
the scope under `state_var(op)`, which every plan binds like a persistable (created by
`core.philox.new_state` the first time)."""
from ..core import philox
from ..core.names import EMPTY_VAR_NAME
from . import registry


def stream_var(op):
    """The variable naming `op`'s stream, or None for an op that draws nothing (not a random
    op, or one whose `random_off` attribute is set: dropout at test time)."""
    opdef = registry.find(op.type)
    slot = getattr(opdef, "random_stream", None) if opdef is not None else None
    if slot is None or (opdef.random_off is not None and op.attr(opdef.random_off)):
        return None
    names = [n for n in op.output(slot) if n != EMPTY_VAR_NAME]
    return names[0] if names else None


def stream_of(op):
    """`op`'s stream id (core.philox.stream_id of its stream variable), or None."""
    name = stream_var(op)
    return None if name is None else philox.stream_id(name)


def state_var(op):
    """The scope variable holding `op`'s [key, run] state, or None."""
    name = stream_var(op)
    return None if name is None else philox.state_name(name)

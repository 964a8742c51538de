"""A learning-rate schedule in async parameter-server mode, laid out as Fluid 1.8 lays it
out: the servers run the schedule, stepped by the trainers' steps as they arrive.

Fluid's schedules count steps with one `increment` of a persistable counter
(`@LR_DECAY_COUNTER@`, initialized to begin - step). In sync mode the servers' LR-decay
block runs it once per round. In async mode there is no round, so:

* every trainer k has its own counter `<counter>.trainer_<k>` (int64 [1]); the trainer's
  startup sets its own to 1 (one step), and after each step's gradients the trainer sends it
  to every server (`send`);
* a server's LR-decay block starts with `sum(<counter>.trainer_0, ...) -> <counter>` in place
  of the increment; the server maps each trainer counter to that block (`grad_to_block_id`),
  so the schedule runs whenever a trainer's step count arrives, and it adds what arrives to
  what it holds (pserver.py: a step count is accumulated, not replaced);
* a server's startup sets the counters so that the sum starts at `begin` (trainer 0's
  holds begin, the others 0) and the server runs the block once before serving.

So the step number the schedule sees is begin + the steps received so far: with one
trainer, step s's gradients are applied with the rate of step s, as in sync mode."""
from collections import namedtuple

from ..core.dtypes import VarType
from ..core.names import OpRole
from ..errors import ProgramError
from ..ir import rewrite

__all__ = ["AsyncCounter", "plan", "add_counter_inits", "declare_counters",
           "append_trainer_send", "step_the_lr_block"]


class AsyncCounter(namedtuple("AsyncCounter", "name dtype step begin trainers")):
    """The schedule's step counter of an async job."""

    @property
    def names(self):
        return [f"{self.name}.trainer_{k}" for k in range(self.trainers)]


def _attr(op, name, default=None):
    return op.attr(name) if op.has_attr(name) else default


def plan(main_block, startup_block, lr_ops, trainers):
    """The AsyncCounter of the schedule made of `lr_ops` (indices into `main_block`), or a
    NotImplementedError when it does not count its steps with one `increment` of a counter
    the startup program fills (every schedule of fluid.layers does)."""
    incs = [main_block.ops[i] for i in lr_ops if main_block.ops[i].type == "increment"]
    if len(incs) != 1:
        raise NotImplementedError(
            f"distribute transpiler: a learning-rate schedule in async mode needs one step "
            f"counter (an `increment` op); this one has {len(incs)}")
    inc = incs[0]
    name = inc.input("X")[0]
    if inc.output("Out") != [name]:
        raise NotImplementedError(f"distribute transpiler: the schedule's increment writes "
                                  f"{inc.output('Out')}, not its counter '{name}'")
    inits = [op for op in startup_block.ops if op.output_arg_names == [name]
             and op.type == "fill_constant"]
    if len(inits) != 1:
        raise ProgramError(f"distribute transpiler: the startup program must fill the "
                           f"learning-rate counter '{name}' once (found {len(inits)})")
    var = main_block.find_var_recursive(name)
    step = float(_attr(inc, "step", 1.0))
    begin = float(_attr(inits[0], "value", 0.0)) + step
    return AsyncCounter(name, var.dtype if var is not None else VarType.INT64, step, begin,
                        int(trainers))


def declare_counters(block, counter):
    """Declare the trainers' counters (persistable) in `block`; their names."""
    for n in counter.names:
        if n not in block.vars:
            rewrite.add_var(block, n, VarType.LOD_TENSOR, [1], counter.dtype, 0,
                            persistable=True)
    return counter.names


def add_counter_inits(startup_block, counter, for_pserver):
    """In place: fill the trainers' counters at the start of `startup_block` (first, as
    Fluid's initializers prepend). A trainer's: 1 each (one step per send); a server's: so
    that their sum is `begin` (see the module). A counter already filled is left alone."""
    declare_counters(startup_block, counter)
    for k, n in reversed(list(enumerate(counter.names))):
        if any(n in op.output_arg_names for op in startup_block.ops):
            continue
        value = (counter.begin if k == 0 else 0.0) if for_pserver else 1.0
        rewrite.insert_op(startup_block, 0, "fill_constant", {}, {"Out": [n]},
                          {"shape": [1], "dtype": int(counter.dtype), "value": float(value),
                           "op_role": OpRole.Forward})


def append_trainer_send(block, counter, trainer_id, endpoints, ctrl):
    """Append the trainer's send of its counter to every server."""
    mine = counter.names[trainer_id]
    rewrite.append_op(block, "send", {"X": [mine]}, {"Out": [ctrl]},
                      {"epmap": list(endpoints), "sync_mode": False,
                       "trainer_id": trainer_id, "op_role": OpRole.RPC,
                       "op_role_var": [mine, mine]})


def step_the_lr_block(lr_block, counter):
    """In place: the server's LR-decay block steps by the trainers' counters: its
    `increment` becomes `sum(<counter>.trainer_k...) -> <counter>`, at the same place."""
    for i, op in enumerate(lr_block.ops):
        if op.type == "increment" and op.input("X") == [counter.name]:
            rewrite.remove_op(lr_block, op)
            rewrite.insert_op(lr_block, i, "sum", {"X": counter.names},
                              {"Out": [counter.name]}, {"op_role": OpRole.LRSched})
            return
    raise ProgramError(f"distribute transpiler: the LR-decay block has no increment of "
                       f"'{counter.name}'")

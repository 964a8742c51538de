"""`Executor.run(..., use_prune=True)`: run only what the fetches (and the optimizer ops
named in the fetch list) need, as Fluid 1.8 does.

Fluid 1.8 lets a fetch list hold, besides variables and names, the ops `minimize` returns
(`[loss, train_op]`, or the `(ops, params_grads)` tuple itself): those pick which optimizer
a run applies and switch pruning on. The program is pruned to the fetches and those ops given
the fed names (a fed variable cuts off its producers; `Program._prune_with_input`), and the
pruned program is cached per (program, feed names, fetch list), so later runs of the same
signature reuse it; fed names the pruned program no longer has are dropped with a warning.
"""
import copy
import warnings

from ..core.names import OpRole
from ..ir.views import OpView, VarView, op_role


def is_optimize_op(op):
    return bool(op_role(op.desc if not hasattr(op.desc, "proto") else op.desc.proto)
                & OpRole.Optimize)


def split_optimize_ops(fetch_list):
    """(fetch targets, optimizer ops) of a Fluid fetch list: a nested list is flattened, a
    tuple's first item (`minimize`'s op list) is taken; an op that is not an optimizer op,
    or anything but a name, a variable or an op, is a TypeError (Fluid's checks)."""
    fetches, ops = [], []

    def take(item):
        if isinstance(item, OpView):
            if not is_optimize_op(item):
                raise TypeError("The operator in fetch_list is not an optimize_op")
            ops.append(item)
        elif isinstance(item, (VarView, str)):
            fetches.append(item)
        else:
            raise TypeError(f"The item in fetch_list should be str, variable or "
                            f"optimize_op, but recieved {type(item)}.")

    for item in fetch_list:
        if isinstance(item, list):
            for i in item:
                take(i)
        elif isinstance(item, tuple):
            for i in item[0]:
                take(i)
        else:
            take(item)
    return fetches, ops


def _key_of(item):
    if isinstance(item, VarView):
        return item.name
    if isinstance(item, OpView):
        return ("op", id(item))          # the op lives in its block as long as the program
    if isinstance(item, (list, tuple)):
        return tuple(_key_of(i) for i in (item[0] if isinstance(item, tuple) else item))
    return item


def cache_key(program, feed, fetch_list):
    """The pruned program's cache key within one program: its revision, the fed names and
    the fetch list as given (variables by name, ops by identity)."""
    inner = getattr(program, "program_for_executor", None)
    revision = getattr(inner() if inner is not None else program, "revision", None)
    if isinstance(feed, dict):
        feed_names = tuple(feed)
    elif isinstance(feed, (list, tuple)):
        feed_names = tuple(tuple(f) for f in feed)
    else:
        feed_names = ()
    return (revision, feed_names, tuple(_key_of(f) for f in fetch_list))


def feed_names_of(feed):
    if isinstance(feed, dict):
        return list(feed)
    if isinstance(feed, (list, tuple)):
        return [n for each in feed for n in each]
    return []


def prune_program(program, feed, fetch_list, optimize_ops):
    """`program` pruned to `fetch_list` and `optimize_ops` (every optimizer op of the
    program when none is given) given the fed names. A CompiledProgram is copied with the
    pruned program inside, to be compiled anew; one made from a graph is not pruned
    (warning), as in Fluid."""
    compiled = hasattr(program, "program_for_executor")
    if compiled:
        origin = program._program
        if origin is None:
            warnings.warn("The program holds no _program, maybe it is constructed by graph, "
                          "which can't be pruned yet.")
            return program
    else:
        origin = program
    if not hasattr(origin, "_prune_with_input"):
        raise TypeError(f"use_prune needs a fluid.Program (or a CompiledProgram of one), "
                        f"got {type(origin).__name__}")
    if not optimize_ops:
        optimize_ops = [op for block in origin.blocks for op in block.ops
                        if is_optimize_op(op)]
    pruned = origin._prune_with_input(feed_names_of(feed), list(fetch_list) +
                                      list(optimize_ops))
    if not compiled:
        return pruned
    out = copy.copy(program)
    out._program = pruned
    out._compiled = False
    out._executor = None
    return out


def update_feed(program, feed):
    """`feed` without the names the (pruned) program lacks, each dropped with Fluid's
    warning."""
    inner = getattr(program, "program_for_executor", None)
    block = (inner() if inner is not None else program).global_block()

    def kept(d):
        out = {}
        for name, value in d.items():
            if block.find_var_recursive(name) is None:
                warnings.warn(f"The variable {name} is not found in program. It is not "
                              f"declared or is pruned.")
            else:
                out[name] = value
        return out

    if isinstance(feed, dict):
        return kept(feed)
    if isinstance(feed, (list, tuple)):
        return [kept(each) for each in feed]
    return feed

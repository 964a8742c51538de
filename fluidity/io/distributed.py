"""`save_persistables` of a transpiled trainer program (Fluid's
`_save_distributed_persistables`): what lives on the trainer is saved as usual; what lives
on the parameter servers is fetched and saved whole by the chief trainer.

The transpiler leaves `program._parameters_on_pservers` (transpiler/vars_distributed.py):
every variable the servers hold, slice by slice. Optimizer accumulators and remote-prefetch
tables ("Optimizer", "RemotePrefetch") exist only there: the chief (`_is_chief`) appends one
`recv_save` op per such variable, which fetches its slices, joins them in block order and
writes the whole variable under its origin name, so the directory loads into an
undistributed program. A distributed lookup table, too large to join, is saved by each
server into `dirname/__lookup_table__` (a `checkpoint_notify` op).

`load_persistables` of a transpiled pserver program (Fluid's
`_load_distributed_persistables`) is the other way round: the server reads its own slices
out of the whole variables of such a directory (or of one an undistributed program saved),
each slice a `load` op from its origin's file at the slice's offset."""
import os

from ..core.dtypes import VarType
from ..framework import Program

__all__ = ["save_distributed_persistables", "load_distributed_persistables"]

_NOT_SAVED = (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.READER)


def _remote_save_program(dirname, remote):
    """A program of recv_save ops, one per origin variable of `remote`
    ({origin name: [VarDistributed]})."""
    prog = Program()
    block = prog.global_block()
    for name, parts in remote.items():
        origin, is_slice = parts[0].origin, parts[0].is_slice
        if not is_slice:
            # one whole copy a server (an accumulator such as Adam's beta1_pow, kept by
            # each block's update alike): the first is the variable, as Fluid's file reads
            parts = parts[:1]
        slots = [None] * len(parts)
        for i, part in enumerate(parts):
            at = part.block_id if is_slice else i
            if not 0 <= at < len(parts) or slots[at] is not None:
                raise ValueError(f"save_persistables: the slices of '{name}' on the servers "
                                 f"have block ids {[p.block_id for p in parts]}, not 0..."
                                 f"{len(parts) - 1} once each")
            slots[at] = (i, part)
        block.append_op(type="recv_save", attrs={
            "trainer_id": 0, "shape": [int(d) for d in origin.shape],
            "slice_shapes": [",".join(str(int(d)) for d in p.slice.shape) for _i, p in slots],
            "slice_varnames": [f"{p.slice.name}.slice.{i}" for i, p in slots],
            "remote_varnames": [p.slice.name for _i, p in slots],
            "endpoints": [p.endpoint for _i, p in slots],
            "file_path": os.path.join(dirname, origin.name)})
    return prog


def _check_distributed(main_program, dirname, what):
    """TypeError / ValueError (Fluid's) unless `main_program` is a transpiled Program and
    `dirname` is given."""
    if not isinstance(main_program, Program):
        raise TypeError(f"'main_program' should be an instance of Program, got "
                        f"{type(main_program).__name__}")
    if not getattr(main_program, "_is_distributed", False):
        raise ValueError(f"'_{what}_distributed_persistables' just be designed for "
                         f"distributed training (a transpiled program).")
    if dirname is None:
        raise ValueError(f"{what}_persistables of a distributed program needs a dirname")


def save_distributed_persistables(executor, dirname, main_program, save_vars):
    """Save a transpiled trainer program's persistables into `dirname` (see the module);
    `save_vars` is io's, which saves the trainer's own."""
    _check_distributed(main_program, dirname, "save")
    overview = getattr(main_program, "_parameters_on_pservers", None)
    remote = (overview.get_distributed_vars_by_vtypes(["Optimizer", "RemotePrefetch"],
                                                       groupby=True)
              if overview is not None else {})
    table = getattr(main_program, "_distributed_lookup_table", None)
    tables = [] if not table else (list(table) if isinstance(table, list) else [table])
    exclude = set(remote) | set(tables)
    local = [v for v in main_program.list_vars()
             if v.persistable and v.name not in exclude and v.type not in _NOT_SAVED]
    if local:
        save_vars(executor, dirname, main_program=main_program, vars=local)
    if not getattr(main_program, "_is_chief", False):
        return
    if remote:
        executor.run(_remote_save_program(dirname, remote))
    if tables:
        prog = Program()
        prog.global_block().append_op(
            type="checkpoint_notify", inputs={}, outputs={},
            attrs={"epmap": list(getattr(main_program, "_endpoints", [])),
                   "dir": os.path.join(dirname, "__lookup_table__"),
                   "lookup_table": tables[0]})
        executor.run(prog)


def load_distributed_persistables(executor, dirname, main_program):
    """Load into a transpiled pserver program's scope the variables its server holds
    (`_parameters_on_pservers` at its `_ps_endpoint`) from the whole variables saved in
    `dirname`: a slice from its origin's file at its offset, a whole copy from its file. A
    distributed lookup table's shard is not among them: its server restores it from its
    own checkpoint (`__lookup_table__`)."""
    _check_distributed(main_program, dirname, "load")
    endpoint = getattr(main_program, "_ps_endpoint", None)
    if not endpoint:
        raise ValueError("'_load_distributed_persistables' need current_endpoint set in "
                         "DistributeTranspiler.transpile")
    overview = main_program._parameters_on_pservers
    prog = Program()
    block = prog.global_block()
    for part in overview.get_distributed_vars_by_ep(endpoint):
        if part.vtype == "RemotePrefetch":
            continue
        s = part.slice
        out = block.create_var(name=s.name, type=s.type, shape=s.shape, dtype=s.dtype,
                               persistable=True)
        attrs = {"file_path": os.path.join(dirname, part.origin.name)}
        if part.is_slice:
            attrs.update(seek=int(part.offset), shape=[int(d) for d in s.shape])
        block.append_op(type="load", outputs={"Out": [out]}, attrs=attrs)
    executor.run(prog)

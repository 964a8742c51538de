"""Save and load variables in Paddle's layouts, as Paddle does it: a throwaway program of
`save`/`load` ops (one file per variable, named after it) or one `save_combine` /
`load_combine` op (one file, the variables' records sorted by name), run by the executor in
the global scope.

`write_vars` / `read_vars` run those programs on a directory as it is; the public
`save_vars` / `load_vars` wrap them in a staged, atomic directory save (fluidity.io.atomic)
and a manifest-checked load, and the other savers (inference models, checkpoints) call
them inside their own staged save.
"""
import os

from ..core.dtypes import VarType
from ..errors import ExecutionError, FluidityError
from ..executor import Executor
from ..framework import Parameter, Program, Variable, default_main_program
from . import atomic, manifest

# a py_reader's queue variable (RAW) holds no tensor either: Paddle skips RAW too
_NOT_SAVED = (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.READER, VarType.RAW)


def is_persistable(var):
    """Paddle's rule: persistable, and not a feed/fetch holder or a reader."""
    return var.persistable and var.type not in _NOT_SAVED


def is_parameter(var):
    return isinstance(var, Parameter)


def as_program(p):
    """`p`, or the default main program when None; anything else is refused."""
    p = default_main_program() if p is None else p
    if not isinstance(p, Program):
        raise FluidityError(f"main_program must be a Program, got {type(p).__name__}")
    return p


def select(main_program, vars, predicate):
    """The variables to save/load: `vars`, or those of the program `predicate` accepts;
    unique by name, RAW variables skipped (as Paddle does)."""
    if vars is None:
        vars = [v for v in as_program(main_program).list_vars()
                if predicate is None or predicate(v)]
    out = {}
    for v in vars:
        if not isinstance(v, Variable):
            raise FluidityError(f"vars must hold Variables, got {type(v).__name__}")
        if v.type != VarType.RAW:
            out.setdefault(v.name, v)
    return list(out.values())


def _clone_var(block, var):
    return block.create_var(name=var.name, shape=var.shape, dtype=var.dtype, type=var.type,
                            lod_level=var.lod_level, persistable=True)


def run_io_program(executor, program):
    """Run a throwaway program; an op's own error (naming the file) is raised as is.
    Files are read and written on the host: with a device executor (CUDAPlace) the save
    ops copy each device tensor to the host (DeviceTensor's `_array`), and loaded values
    are host tensors that the next device run moves to the device (executor/cuda.py)."""
    if executor is None or getattr(executor, "device", "cpu") != "cpu":
        executor = Executor()
    try:
        executor.run(program)
    except ExecutionError as e:
        if isinstance(e.cause, FluidityError):
            raise e.cause from None
        raise


def io_program(op, combined_op, dirname, vars, filename, slot):
    """Paddle's save/load program: one `op` per variable (file = its name under `dirname`),
    or one `combined_op` over the variables sorted by name (file `filename`)."""
    prog = Program()
    block = prog.global_block()
    clones = [_clone_var(block, v) for v in vars]
    key = "X" if slot == "inputs" else "Out"
    if filename is None:
        for v in clones:
            block.append_op(op, **{slot: {key: v}},
                            attrs={"file_path": os.path.join(dirname, v.name)},
                            infer_shape=False)
    elif clones:
        sparse = [v.name for v in clones if v.type != VarType.LOD_TENSOR]
        if sparse:
            raise FluidityError(f"{os.path.join(dirname, filename)}: variables {sparse} are not "
                                f"LoDTensors, which a combined file cannot hold; use separate "
                                f"files (filename=None)")
        clones.sort(key=lambda v: v.name)
        block.append_op(combined_op, **{slot: {key: clones}},
                        attrs={"file_path": os.path.join(dirname, filename)},
                        infer_shape=False)
    return prog


def write_vars(executor, dirname, vars, filename=None):
    """Run the save program of `vars` into `dirname` as it is (no staging)."""
    run_io_program(executor, io_program("save", "save_combine", dirname, vars,
                                        filename or None, "inputs"))


def read_vars(executor, dirname, vars, filename=None, saved_in=None):
    """Check the files against the manifest of the save they belong to (`saved_in`, a
    directory at or above `dirname`; `dirname` itself by default), then run the load program
    of `vars`. Each value must fit its variable (dtype and shape) and a combined file must
    hold exactly the variables asked for."""
    if filename:
        path = os.path.join(dirname, filename)
        if vars and not os.path.isfile(path):
            raise FluidityError(f"{path}: no such parameter file")
    root = saved_in or dirname
    names = [filename] if filename else [v.name for v in vars]
    manifest.verify(root, [os.path.relpath(os.path.join(dirname, n), root) for n in names])
    run_io_program(executor, io_program("load", "load_combine", dirname, vars,
                                        filename or None, "outputs"))


def save_vars(executor, dirname, main_program=None, vars=None, predicate=None, filename=None):
    """Save `vars` (or the variables of `main_program` that `predicate` accepts) from the
    global scope into `dirname`: one file per variable, or all in `filename`, sorted by name.
    The save is atomic as a whole; files of `dirname` it does not write are kept."""
    vars = select(main_program, vars, predicate)
    with atomic.StagedDirectory(dirname) as stage:
        write_vars(executor, stage.path, vars, filename or None)


def load_vars(executor, dirname, main_program=None, vars=None, predicate=None, filename=None):
    """Load what `save_vars` saved into the global scope (checked against the manifest
    where the directory has one)."""
    vars = select(main_program, vars, predicate)
    with atomic.reading(dirname) as d:
        read_vars(executor, d, vars, filename or None)


def save_params(executor, dirname, main_program=None, filename=None):
    save_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def load_params(executor, dirname, main_program=None, filename=None):
    load_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def save_persistables(executor, dirname, main_program=None, filename=None):
    save_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)


def load_persistables(executor, dirname, main_program=None, filename=None):
    load_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)

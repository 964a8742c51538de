"""Save and load variables in Paddle's layouts, as Paddle does it: a throwaway program of
`save`/`load` ops (one file per variable, named after it) or one `save_combine` /
`load_combine` op (one file, the variables' records sorted by name), run by the executor in
the global scope.

`write_vars` / `read_vars` run those programs on a directory as it is; the public
`save_vars` / `load_vars` wrap them in a staged, atomic directory save (fluidity.io.atomic)
and a manifest-checked load, and the other savers (inference models, checkpoints) call
them inside their own staged save.

In memory, as Fluid 1.8: `save_vars(executor, None, ...)` (no dirname, no filename) returns
the variables' combined records as bytes (what a `filename` would hold), and
`load_vars(executor, None, ..., filename=those_bytes)` loads them back.
"""
import io
import os
import warnings

from ..core import dtypes
from ..core import serialization as ser
from ..core.dtypes import VarType
from ..core.scope import global_scope
from ..errors import ArgumentTypeError, ExecutionError, FluidityError, FormatError, ShapeError
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
    """`p`, or the default main program when None, or a CompiledProgram's program (Fluid's
    `_get_valid_program`); anything else is a TypeError."""
    p = default_main_program() if p is None else p
    if hasattr(p, "program_for_executor") and not isinstance(p, Program):
        inner = getattr(p, "_program", None)
        if not isinstance(inner, Program):
            raise ArgumentTypeError(f"The type of input main_program is invalid, expected "
                                    f"type is Program, but received a CompiledProgram of "
                                    f"{type(inner).__name__}")
        return inner
    if not isinstance(p, Program):
        raise ArgumentTypeError(f"The type of input main_program is invalid, expected type "
                                f"is fluid.Program, but received {type(p).__name__}")
    return p


_get_valid_program = as_program


def select(main_program, vars, predicate):
    """The variables to save/load: `vars`, or those of the program `predicate` accepts;
    unique by name, RAW variables skipped (as Paddle does)."""
    program = as_program(main_program)          # checked even when vars are given, as Fluid
    if vars is None:
        vars = [v for v in program.list_vars() if predicate is None or predicate(v)]
    out = {}
    for v in vars:
        if not isinstance(v, Variable):
            raise ArgumentTypeError(f"vars must hold Variables, got {type(v).__name__}")
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


# Fluid's words, which programs compare
NO_VARIABLE_WARNING = ("no variable in your model, please ensure there are any variables in "
                       "your model to save")


def write_vars(executor, dirname, vars, filename=None):
    """Run the save program of `vars` into `dirname` as it is (no staging). With no
    variable to save it writes nothing and warns, as Fluid's save_vars does (a model of
    feeds and ops alone has no parameters; the warning says so in case that is a mistake)."""
    vars = list(vars)
    if not vars:
        warnings.warn(NO_VARIABLE_WARNING)
        return
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
    The save is atomic as a whole; files of `dirname` it does not write are kept. With
    neither `dirname` nor `filename`, returns those combined records as bytes instead."""
    vars = select(main_program, vars, predicate)
    if dirname is None and filename is None:
        return vars_to_bytes(executor, vars)
    with atomic.StagedDirectory(dirname) as stage:
        write_vars(executor, stage.path, vars, filename or None)


def load_vars(executor, dirname, main_program=None, vars=None, predicate=None, filename=None):
    """Load what `save_vars` saved into the global scope (checked against the manifest
    where the directory has one). With `dirname` None, `filename` holds the bytes an
    in-memory `save_vars` returned."""
    vars = select(main_program, vars, predicate)
    if dirname is None:
        if not isinstance(filename, (bytes, bytearray)):
            raise ArgumentTypeError(f"load_vars: with dirname None, filename must hold the "
                                    f"saved bytes, got {type(filename).__name__}")
        vars_from_bytes(bytes(filename), vars)
        return
    with atomic.reading(dirname) as d:
        read_vars(executor, d, vars, filename or None)


def vars_to_bytes(executor, vars):
    """The combined records of `vars` (sorted by name) from the global scope, as bytes: a
    `save_combine` op with `save_to_memory`, as Fluid's in-memory save."""
    prog = Program()
    block = prog.global_block()
    clones = sorted((_clone_var(block, v) for v in vars), key=lambda v: v.name)
    out = block.create_var(name="@saved_params@", type=VarType.RAW, persistable=True)
    block.append_op("save_combine", {"X": clones}, {"Y": out},
                    {"file_path": "", "save_to_memory": True}, infer_shape=False)
    run_io_program(executor, prog)
    data = global_scope().find_var(out.name).value
    global_scope().erase_vars([out.name])
    return data


def vars_from_bytes(data, vars):
    """Set `vars` in the global scope from combined records `data` (sorted by name), each
    checked to fit its variable; nothing is set unless all of them read and fit."""
    vars = sorted(vars, key=lambda v: v.name)
    r = ser.reader(io.BytesIO(data))
    values = []
    for k, v in enumerate(vars):
        try:
            t = ser.read_lod_tensor(r)
        except FormatError as e:
            raise FormatError(f"in-memory parameters: variable #{k} '{v.name}' of the "
                              f"{len(vars)} expected: {e}") from None
        got, want = list(t._array.shape), list(v.shape)
        if len(got) != len(want) or any(w >= 0 and w != g for w, g in zip(want, got)) or (
                v.dtype is not None and dtypes.to_code(t._array.dtype) != v.dtype):
            raise ShapeError(f"in-memory parameters: variable '{v.name}' is "
                             f"{dtypes.name(v.dtype)} {want} in the program, but the bytes "
                             f"hold {t._array.dtype} {got}")
        values.append(t)
    if not r.at_end():
        raise FormatError(f"in-memory parameters: bytes left after the last of the "
                          f"{len(vars)} variables the program expects")
    scope = global_scope()
    for v, t in zip(vars, values):
        scope.var(v.name).value = t


def get_parameter_value(para, executor):
    """The value of Parameter `para` in the global scope, as an ndarray (Fluid's)."""
    if not is_parameter(para):
        raise ArgumentTypeError(f"get_parameter_value: '{getattr(para, 'name', para)}' is "
                                f"not a Parameter")
    prog = Program()
    var = _clone_var(prog.global_block(), para)
    return executor.run(prog, feed={}, fetch_list=[var])[0]


def get_parameter_value_by_name(name, executor, program=None):
    """`get_parameter_value` of the parameter `name` of `program` (default: the main)."""
    return get_parameter_value(as_program(program).global_block().var(name), executor)


def save_params(executor, dirname, main_program=None, filename=None):
    return save_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def load_params(executor, dirname, main_program=None, filename=None):
    load_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def save_persistables(executor, dirname, main_program=None, filename=None):
    if main_program is not None and getattr(main_program, "_is_distributed", False):
        from .distributed import save_distributed_persistables
        return save_distributed_persistables(executor, dirname, main_program, save_vars)
    return save_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)


def load_persistables(executor, dirname, main_program=None, filename=None):
    """Load `main_program`'s persistables from `dirname`. A transpiled pserver program
    loads its server's slices out of the whole variables saved there (Fluid's
    `_load_distributed_persistables`); a trainer program, its own variables."""
    if main_program is not None and getattr(main_program, "_is_distributed", False) and \
            any(op.type == "listen_and_serv" for op in main_program.global_block().ops):
        from .distributed import load_distributed_persistables
        return load_distributed_persistables(executor, dirname, main_program)
    load_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)

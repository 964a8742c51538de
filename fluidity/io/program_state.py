"""Fluid 1.6+'s whole-program state: ``save(program, model_path)`` writes
``model_path.pdparams`` (pickle of {name: ndarray} of the parameters), ``.pdopt`` (the other
persistables: optimizer moments, beta powers, learning rate and its counters) and
``.pdmodel`` (the ProgramDesc), as one atomic file group (fluidity.io.atomic);
``load(program, model_path, executor, var_list)`` and ``load_program_state(model_path,
var_list)`` + ``set_program_state(program, state_dict)`` read them back, or a directory /
combined file written by save_vars / save_params / save_persistables.

Pickles are read by an unpickler that builds only dicts of numpy arrays (a state file
from elsewhere cannot run code), both numpy 1.x's and 2.x's. They are written naming only
`numpy.ndarray` and `numpy.dtype`, which every numpy has: numpy 2's own array pickles name
its private `numpy._core`, which numpy < 1.26 (so Paddle 2.x environments) cannot import.
"""
import logging
import os
import pickle

import numpy as np

from ..core import dtypes
from ..core.scope import Scope, global_scope, scope_guard
from ..errors import FluidityError, FormatError, ShapeError
from ..framework import Program
from . import atomic, manifest
from .inference import write_program
from .variables import as_program, is_parameter, is_persistable, read_vars

logger = logging.getLogger("fluidity")
PICKLE_PROTOCOL = 2  # what Fluid 1.x wrote and Python 2 reads
_SUFFIXES = (".pdparams", ".pdopt", ".pdmodel")
_ALLOWED = {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("_codecs", "encode"), ("collections", "OrderedDict"),
    ("__builtin__", "bytes"), ("builtins", "bytes"),   # an empty array's raw data, b""
}


def is_belong_to_optimizer(var):
    """Fluid's rule for .pdopt: a persistable that is neither a parameter nor fed data."""
    return not (is_parameter(var) or var.need_check_feed) and is_persistable(var)


class _ArrayPickler(pickle.Pickler):
    """Pickles an ndarray as numpy.ndarray((0,), "b") followed by ndarray.__setstate__ of
    its own state (version, shape, dtype, Fortran order, raw bytes): what numpy's
    _reconstruct does when unpickling, through names that numpy 1.x and 2.x both hold, so
    either reads the file whichever numpy wrote it."""

    def reducer_override(self, obj):
        if type(obj) is np.ndarray:
            return np.ndarray, ((0,), "b"), obj.__reduce__()[2]
        return NotImplemented


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a state dict of "
                                         f"arrays")
        module = module.replace("numpy.core.", "numpy._core.") \
            if hasattr(np, "_core") else module.replace("numpy._core.", "numpy.core.")
        return super().find_class(module, name)


def _read_pickle(path):
    d, name = os.path.split(path)
    manifest.verify(d, [name])
    try:
        with open(path, "rb") as f:
            state = _ArrayUnpickler(f, encoding="latin1").load()
    except OSError as e:
        raise FluidityError(f"{path}: cannot read: {e.strerror or e}") from None
    except Exception as e:  # a pickle that is not one: UnpicklingError, EOFError, ...
        raise FormatError(f"{path}: not a state dict of arrays ({type(e).__name__}: {e})") \
            from None
    if not isinstance(state, dict):
        raise FormatError(f"{path}: holds a {type(state).__name__}, not a dict of arrays")
    return {k: v for k, v in state.items() if isinstance(v, np.ndarray)}


def _value(name):
    var = global_scope().find_var(name)
    if var is None or not var.is_initialized():
        raise FluidityError(f"cannot save variable '{name}': it has no value in the global "
                            f"scope (run the startup program first)")
    return np.array(var.get_tensor())


def _dump(path, names):
    state = {n: _value(n) for n in names}
    with open(path, "wb") as f:
        _ArrayPickler(f, protocol=PICKLE_PROTOCOL).dump(state)
        f.flush()
        os.fsync(f.fileno())


def _prefix(model_path):
    model_path = os.fspath(model_path)
    for s in _SUFFIXES:
        if model_path.endswith(s):
            model_path = model_path[:-len(s)]
    if not os.path.basename(model_path):
        raise FluidityError(f"model_path '{model_path}' must be a directory plus a file name "
                            f"prefix, e.g. 'out/model'")
    return model_path


def save(program, model_path):
    """Write `model_path`.pdparams, .pdopt and .pdmodel (one atomic group)."""
    program = as_program(program)
    prefix = os.path.abspath(_prefix(model_path))
    d, base = os.path.split(prefix)
    variables = list(program.list_vars())
    with atomic.StagedFiles(d, base) as stage:
        _dump(os.path.join(stage.path, base + ".pdparams"),
              [v.name for v in variables if is_parameter(v)])
        _dump(os.path.join(stage.path, base + ".pdopt"),
              [v.name for v in variables if is_belong_to_optimizer(v)])
        write_program(os.path.join(stage.path, base + ".pdmodel"), program)


def _set(var, value, source):
    want = [int(x) for x in var.shape]
    got = list(value.shape)
    if len(want) != len(got) or any(w >= 0 and w != g for w, g in zip(want, got)):
        raise ShapeError(f"{source}: variable '{var.name}' is {want} in the program, but the "
                         f"loaded value has shape {got}")
    global_scope().var(var.name).get_tensor().set(value.astype(_dtype_of(var, value),
                                                               copy=False))


def _dtype_of(var, value):
    try:
        return dtypes.to_numpy(var.dtype)
    except FluidityError:
        return value.dtype


def load_program_state(model_path, var_list=None):
    """{name: ndarray} from `model_path`.pdparams (+ .pdopt when there), or from a
    directory of separate files / a combined file written by save_vars & co (a combined
    file needs `var_list`, to know the names)."""
    prefix = _prefix(model_path)
    d, base = os.path.split(os.path.abspath(prefix))
    with atomic.reading(d, base):
        if os.path.isfile(prefix + ".pdparams"):
            state = _read_pickle(prefix + ".pdparams")
            if os.path.isfile(prefix + ".pdopt"):
                state.update(_read_pickle(prefix + ".pdopt"))
            return state
    return _state_from_vars_save(os.fspath(model_path), var_list)


def _state_from_vars_save(model_path, var_list):
    """Load a save_vars-style directory or combined file into a scratch scope; its arrays."""
    if not os.path.exists(model_path):
        raise FluidityError(f"{model_path}: no such file or directory (nor "
                            f"{_prefix(model_path)}.pdparams)")
    if os.path.isdir(model_path):
        block = Program().global_block()
        names = var_list and [v.name for v in var_list]
        with atomic.reading(model_path) as d:
            files = sorted(n for n in os.listdir(d) if not n.startswith(".")
                           and n != manifest.MANIFEST and (names is None or n in names))
            vars_ = var_list and [v for v in var_list if v.name in files] or \
                [block.create_var(name=n, persistable=True) for n in files]
            with scope_guard(Scope()):
                read_vars(None, d, vars_)
                return {v.name: np.array(global_scope().find_var(v.name).get_tensor())
                        for v in vars_}
    if not var_list:
        raise FluidityError(f"{model_path}: a combined parameter file has no names; pass "
                            f"var_list (the variables saved in it)")
    d, name = os.path.split(os.path.abspath(model_path))
    with atomic.reading(d, name), scope_guard(Scope()):
        read_vars(None, d, list(var_list), name)
        return {v.name: np.array(global_scope().find_var(v.name).get_tensor())
                for v in var_list}


def set_program_state(program, state_dict):
    """Set the persistables of `program` found in `state_dict` in the global scope (shapes
    checked); logs the names it did not use and the persistables it did not find."""
    program = as_program(program)
    used = set()
    missing = []
    for var in program.list_vars():
        if not is_persistable(var) or var.need_check_feed:
            continue
        if var.name in state_dict:
            _set(var, np.asarray(state_dict[var.name]), "set_program_state")
            used.add(var.name)
        else:
            missing.append(var.name)
    unused = sorted(set(state_dict) - used)
    if unused:
        logger.warning("set_program_state: not set, the program has no such persistable: %s",
                       unused)
    if missing:
        logger.warning("set_program_state: persistables without a value in the state: %s",
                       missing)
    return unused


def load(program, model_path, executor=None, var_list=None):
    """Load what `save(program, model_path)` wrote into the global scope: every parameter
    from .pdparams and every optimizer variable from .pdopt must be there and fit. A
    directory or combined file of save_vars & co loads the program's variables found
    there (a combined file needs var_list)."""
    program = as_program(program)
    prefix = _prefix(model_path)
    d, base = os.path.split(os.path.abspath(prefix))
    with atomic.reading(d, base):   # both pickles read under the lock a commit takes
        if os.path.isfile(prefix + ".pdparams"):
            _load_pickles(program, prefix)
            return
    if os.path.isdir(model_path):
        var_list = var_list or [v for v in program.list_vars() if is_persistable(v)]
    state = _state_from_vars_save(os.fspath(model_path), var_list)
    for v in var_list:
        if v.name in state:
            _set(v, state[v.name], model_path)


def _load_pickles(program, prefix):
    """The program's parameters from prefix.pdparams, its optimizer variables from
    prefix.pdopt: every one must be there."""
    variables = list(program.list_vars())
    groups = [(prefix + ".pdparams", [v for v in variables if is_parameter(v)]),
              (prefix + ".pdopt", [v for v in variables if is_belong_to_optimizer(v)])]
    for path, vars_ in groups:
        if not vars_:
            continue
        if not os.path.isfile(path):
            raise FluidityError(f"{path}: no such file (the program has {len(vars_)} "
                                f"variables to load from it)")
        state = _read_pickle(path)
        absent = [v.name for v in vars_ if v.name not in state]
        if absent:
            raise FluidityError(f"{path}: no value for variables {absent}")
        for v in vars_:
            _set(v, state[v.name], path)

"""Checkpoints for long training, with Fluid 1.0-1.2's names and layout:

    checkpoint_dir/checkpoint_<serial>/__model__/<one file per variable>, _SUCCESS
    checkpoint_dir/checkpoint_<serial>/trainer_<id>/<one file per trainer arg>, _SUCCESS

A checkpoint holds every checkpoint variable of the program (persistable, not a feed/fetch
holder, reader or RAW, no "@GRAD", ".trainer_" or ".block" in the name): parameters and the
optimizer's state (moments, beta powers, learning-rate counters), and the trainer's
arguments (epoch and step counters, an AsyncExecutor's position in its file list, ...):
each as Paddle's text file, and all of them typed in ``__trainer_args__.json``.

Each checkpoint is one staged directory save (fluidity.io.atomic): it appears under its
name only complete, with a manifest, so a checkpoint cut short by a kill is never the one
loaded; the oldest beyond `max_num_checkpoints` are removed after it (renamed away first, so
a kill never leaves half of one under a checkpoint's name).
"""
import json
import os
import re

from ..core import serialization as ser
from ..core.dtypes import VarType
from ..errors import FluidityError
from . import atomic, manifest
from .variables import as_program, read_vars, select, write_vars

SUCCESS_MARK_FILENAME = "_SUCCESS"
CHECKPOINT_PREFIX = "checkpoint"
MODEL_DIR = "__model__"
TRAINER_PREFIX = "trainer"
CHECKPOINT_SEPARATOR = "_"
TRAINER_ARGS_FILE = "__trainer_args__.json"
_SERIAL_DIR = re.compile(rf"^{CHECKPOINT_PREFIX}{CHECKPOINT_SEPARATOR}(\d+)$")
_NOT_CHECKPOINTED = (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.RAW, VarType.READER)


class CheckpointError(FluidityError, ValueError):
    """A checkpoint that is not there (no complete checkpoint, an unknown serial) or
    arguments of a checkpoint call that Fluid refuses with a ValueError."""


def is_checkpoint_var(var):
    """Fluid's rule for what a checkpoint holds."""
    if var.type in _NOT_CHECKPOINTED:
        return False
    if any(s in var.name for s in ("@GRAD", ".trainer_", ".block")):
        return False
    return var.persistable


def _serial_dir(checkpoint_dir, serial):
    return os.path.join(checkpoint_dir, f"{CHECKPOINT_PREFIX}{CHECKPOINT_SEPARATOR}{serial}")


def _trainer_dir(serial_dir, trainer_id):
    return os.path.join(serial_dir, f"{TRAINER_PREFIX}{CHECKPOINT_SEPARATOR}{trainer_id}")


def _serials(checkpoint_dir):
    """{serial: complete?} of the checkpoint_<n> directories in `checkpoint_dir`."""
    try:
        names = os.listdir(checkpoint_dir)
    except OSError:
        return {}
    out = {}
    for n in names:
        m = _SERIAL_DIR.match(n)
        path = os.path.join(checkpoint_dir, n)
        if m and os.path.isdir(path):
            out[int(m[1])] = os.path.isfile(os.path.join(path, MODEL_DIR,
                                                         SUCCESS_MARK_FILENAME))
    return out


def _check_dir(checkpoint_dir):
    if checkpoint_dir is None:
        raise CheckpointError("'checkpoint_dir' should not be None")
    return os.fspath(checkpoint_dir)


def get_latest_checkpoint_serial(checkpoint_dir):
    """The serial of the newest complete checkpoint in `checkpoint_dir`, or -1."""
    if not checkpoint_dir or not os.path.isdir(checkpoint_dir):
        return -1
    atomic.settle(os.path.realpath(checkpoint_dir))
    done = [s for s, complete in _serials(checkpoint_dir).items() if complete]
    return max(done, default=-1)


def _args_json(trainer_args):
    try:
        return json.dumps(trainer_args, sort_keys=True, indent=1)
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"trainer_args must be JSON-serializable (numbers, strings, "
                              f"lists, dicts): {e}") from None


def _write_text(path, text):
    ser.atomic_write(path, lambda f: f.write(text.encode()))


def _write_trainer_args(directory, trainer_args, text, serial):
    """Fluid's one file per argument, the JSON `text` of them all, and the success mark."""
    os.makedirs(directory, exist_ok=True)
    for name, value in trainer_args.items():  # Fluid's files: str(value) each
        if not isinstance(name, str) or not name or os.sep in name or name.startswith("."):
            raise CheckpointError(f"trainer_args key {name!r} cannot name a file")
        _write_text(os.path.join(directory, name), str(value))
    _write_text(os.path.join(directory, TRAINER_ARGS_FILE), text)
    _write_text(os.path.join(directory, SUCCESS_MARK_FILENAME), f"checkpoint {serial}\n")


def save_checkpoint(executor, checkpoint_dir, trainer_id=0, trainer_args=None,
                    main_program=None, max_num_checkpoints=3):
    """Save a new checkpoint (serial = the newest + 1) of `main_program`'s checkpoint
    variables (by the chief, trainer 0) and of `trainer_args` (a dict, e.g. {"epoch_id": 3,
    "step_id": 20}); then keep only the newest `max_num_checkpoints`. Returns the serial."""
    checkpoint_dir = _check_dir(checkpoint_dir)
    trainer_args = {} if trainer_args is None else trainer_args
    if not isinstance(trainer_args, dict):
        raise CheckpointError(f"trainer_args must be a dict, got {type(trainer_args).__name__}")
    if not isinstance(max_num_checkpoints, int) or max_num_checkpoints < 1:
        raise CheckpointError(f"max_num_checkpoints must be a positive int, got "
                              f"{max_num_checkpoints!r}")
    program = as_program(main_program)
    args_text = _args_json(trainer_args)   # checked before anything is written
    os.makedirs(checkpoint_dir, exist_ok=True)
    atomic.settle(os.path.realpath(checkpoint_dir))
    serial = max(_serials(checkpoint_dir), default=-1) + 1
    with atomic.StagedDirectory(_serial_dir(checkpoint_dir, serial)) as stage:
        if trainer_id == 0:
            model = os.path.join(stage.path, MODEL_DIR)
            os.makedirs(model, exist_ok=True)
            write_vars(executor, model, select(program, None, is_checkpoint_var))
            _write_text(os.path.join(model, SUCCESS_MARK_FILENAME), f"checkpoint {serial}\n")
        _write_trainer_args(_trainer_dir(stage.path, trainer_id), trainer_args, args_text,
                            serial)
    _keep_newest(checkpoint_dir, max_num_checkpoints)
    return serial


def _keep_newest(checkpoint_dir, n):
    for serial in sorted(_serials(checkpoint_dir), reverse=True)[n:]:
        atomic.retire(_serial_dir(checkpoint_dir, serial))


def _parse_text_arg(text):
    """A trainer arg from Fluid's text file: an int or float when it reads as one."""
    text = text.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _read_trainer_args(serial_dir, trainer_id, names=None):
    d = _trainer_dir(serial_dir, trainer_id)
    typed = os.path.join(d, TRAINER_ARGS_FILE)
    rel = os.path.relpath(typed, serial_dir)
    if os.path.isfile(typed):
        manifest.verify(serial_dir, [rel])
        try:
            args = json.loads(ser.read_file(typed))
        except ValueError as e:
            raise CheckpointError(f"{typed}: not a JSON object of trainer args: {e}") from None
        if names is None:
            return args
        missing = [n for n in names if n not in args]
        if missing:
            raise CheckpointError(f"{typed}: no trainer args {missing}")
        return {n: args[n] for n in names}
    if not os.path.isdir(d):
        if names:
            raise CheckpointError(f"{d}: the checkpoint has no arguments of trainer "
                                  f"{trainer_id}")
        return {}
    names = names if names is not None else sorted(
        n for n in os.listdir(d) if n != SUCCESS_MARK_FILENAME and not n.startswith("."))
    manifest.verify(serial_dir, [os.path.relpath(os.path.join(d, n), serial_dir)
                                 for n in names])
    return {n: _parse_text_arg(ser.read_file(os.path.join(d, n)).decode()) for n in names}


def _complete_serial_dir(checkpoint_dir, serial):
    """The directory of checkpoint `serial` (the newest complete one when None), settled once
    and listed once; a missing or incomplete one is a CheckpointError."""
    if serial is not None and (not isinstance(serial, int) or serial < 0):
        raise CheckpointError(f"'serial' should not be None or <0, got {serial!r}")
    if checkpoint_dir and os.path.isdir(checkpoint_dir):
        atomic.settle(os.path.realpath(checkpoint_dir))
    complete = sorted(s for s, done in _serials(checkpoint_dir).items() if done)
    if serial is None:
        if not complete:
            raise CheckpointError(f"{checkpoint_dir}: no complete checkpoint to load")
        serial = complete[-1]
    path = _serial_dir(checkpoint_dir, serial)
    if serial not in complete:
        raise CheckpointError(f"{path}: no complete checkpoint with serial {serial} (complete "
                              f"ones: {complete})")
    return path


def load_checkpoint(executor, checkpoint_dir, serial=None, main_program=None, trainer_id=0):
    """Load checkpoint `serial` (the newest complete one when None) of `checkpoint_dir`
    into the global scope: every checkpoint variable of `main_program` (the default main
    program when None). Returns the trainer args saved with it (a dict)."""
    checkpoint_dir = _check_dir(checkpoint_dir)
    program = as_program(main_program)
    path = _complete_serial_dir(checkpoint_dir, serial)
    with atomic.reading(path) as d:
        read_vars(executor, os.path.join(d, MODEL_DIR), select(program, None,
                                                               is_checkpoint_var),
                  saved_in=d)
        return _read_trainer_args(d, trainer_id)


def load_trainer_args(checkpoint_dir, serial, trainer_id, trainer_args):
    """Fluid's form: the values of the trainer args named in the list `trainer_args`."""
    if not isinstance(trainer_args, (list, tuple)):
        raise CheckpointError(f"trainer_args must be a list of names, got "
                              f"{type(trainer_args).__name__}")
    path = _complete_serial_dir(_check_dir(checkpoint_dir), serial)
    with atomic.reading(path) as d:
        args = _read_trainer_args(d, trainer_id, list(trainer_args))
    return [args[n] for n in trainer_args]


def clean_checkpoint(checkpoint_dir, delete_dir=False):
    """Remove every checkpoint of `checkpoint_dir` (when training ended well); with
    delete_dir, the directory too when nothing else is left in it."""
    checkpoint_dir = _check_dir(checkpoint_dir)
    if not os.path.isdir(checkpoint_dir):
        return
    atomic.settle(os.path.realpath(checkpoint_dir))
    _keep_newest(checkpoint_dir, 0)
    if delete_dir and not os.listdir(checkpoint_dir):
        os.rmdir(checkpoint_dir)

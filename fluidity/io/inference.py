"""Inference models in Paddle's two layouts, saved atomically (fluidity.io.atomic).

* Fluid 1.x: ``save_inference_model(dirname, feeded_var_names, target_vars, executor, ...)``
  writes ``dirname/__model__`` (or `model_filename`) and the persistables (separate files, or
  one `params_filename`) as one staged directory save.
* Paddle 2.x: ``save_inference_model(path_prefix, feed_vars, fetch_vars, executor)`` -- told
  apart from 1.x by `feed_vars` being Variables, as Paddle's two APIs take them -- writes
  ``<prefix>.pdmodel`` and ``<prefix>.pdiparams`` (combined) as one staged file group.
  `save_inference_model_v2` and `load_inference_model_v2` name that layout explicitly.

``load_inference_model(path, executor)`` reads either: a directory holding `__model__` (or
`model_filename`), else ``<path>.pdmodel``. Every file problem (missing, truncated, corrupt,
changed since the save per the manifest, wrong version, not fitting the program's variable)
raises a FluidityError naming the file. As Fluid 1.8, ``load_inference_model(None, executor,
model_bytes, params_bytes)`` loads a model held in memory (the program's serialized bytes
and the bytes an in-memory `save_persistables(executor, None, program)` returned).
"""
import os
import warnings

from ..core import serialization as ser
from ..core.dtypes import VarType
from ..core.names import OpRole
from ..errors import FluidityError, ProgramError
from ..framework import EMPTY_VAR_NAME, Program, Variable, load_program_file
from ..ir import desc_check
from ..ir import rewrite
from ..transpiler.compat_check import check_program
from ..transpiler.prune import inference_optimize
from . import atomic, manifest
from .variables import (as_program, is_persistable, read_vars, select, vars_from_bytes,
                        write_vars)

MODEL_FILENAME = "__model__"


# ---------------------------------------------------------------------------------------
# programs
# ---------------------------------------------------------------------------------------
def load_program(path):
    """A Program from a serialized ProgramDesc file; errors name the file (and a file that
    differs from what its directory's manifest recorded is refused)."""
    d, name = os.path.split(os.path.abspath(os.fspath(path)))
    manifest.verify(d, [name])
    return load_program_file(path)


def _targets_by_col(program, op_type, slot, what):
    found = {}
    for op in program.global_block().ops:
        if op.type == op_type:
            col = op.attr("col")
            if col in found:
                raise ProgramError(f"two {op_type} ops have col {col}")
            found[col] = op.input(slot)[0] if slot == "X" else op.output(slot)[0]
    if sorted(found) != list(range(len(found))):
        raise ProgramError(f"{what} columns are {sorted(found)}; expected 0..{len(found) - 1}")
    return [found[c] for c in range(len(found))]


def get_feed_target_names(program):
    """Names fed by the program's feed ops, in `col` order (Paddle's GetFeedTargetNames)."""
    return _targets_by_col(program, "feed", "Out", "feed")


def get_fetch_target_names(program):
    return _targets_by_col(program, "fetch", "X", "fetch")


def _names(xs, what, allow_vars=True):
    xs = xs if isinstance(xs, (list, tuple)) else [xs]
    out = []
    for x in xs:
        if isinstance(x, Variable) and allow_vars:
            out.append(x.name)
        elif isinstance(x, str):
            out.append(x)
        else:
            raise FluidityError(f"{what} must be variable names or Variables, got "
                                f"{type(x).__name__}")
    return out


def _wrap_targets(program, targets):
    """Paddle's `scale(x, 1.0, name='save_infer_model/scale_i')` around each target, so an
    activation's output being a target survives pruning and fusion (bool outputs as is)."""
    block = program.global_block()
    out = []
    for i, t in enumerate(targets):
        var = block.find_var_recursive(t)
        if var is None:
            raise ProgramError(f"target '{t}' is not a variable of the program")
        if var.dtype == VarType.BOOL or t.startswith("save_infer_model/scale_"):
            out.append(t)
            continue
        name, k = f"save_infer_model/scale_{i}", 0
        while block.has_var(name):
            k += 1
            name = f"save_infer_model/scale_{i}_{k}"
        res = block.create_var(name=name, dtype=var.dtype, shape=var.shape,
                               lod_level=var.lod_level)
        block.append_op("scale", {"X": t}, {"Out": res},
                        {"scale": 1.0, "bias": 0.0, "bias_after_scale": True})
        out.append(name)
    return out


def _check_inputs(program, feeds):
    """Every variable block 0 reads must be fed, persistable or computed before. A tensor
    array that an op of block 0 writes is not a feed even where it is read first: it starts
    empty (DynamicRNN's output array, which its while op reads and writes)."""
    block = program.global_block()
    have = set(feeds)
    written = {n for op in block.ops for n in op.output_arg_names}
    for op in block.ops:
        for n in op.input_arg_names:
            v = block.find_var_recursive(n)
            if n in have or n == EMPTY_VAR_NAME or (v is not None and v.persistable):
                continue
            if v is not None and v.type == VarType.LOD_TENSOR_ARRAY and n in written:
                continue
            raise ProgramError(
                f"the targets need variable '{n}' (input of op '{op.type}'), which is neither "
                f"fed nor computed from the fed variables {sorted(feeds)}; add it to the feeds")
        have.update(op.output_arg_names)


def normalize_program(program, feeds, targets):
    """The inference program `save_inference_model` writes: a copy of `program` without
    feed/fetch ops, targets wrapped in scale(1.0), pruned to the targets given the feeds,
    is_test set, feed ops prepended (col = position) and fetch ops appended."""
    p = program.clone()
    b = p.global_block()
    for i in reversed([i for i, op in enumerate(b.ops) if op.type in ("feed", "fetch")]):
        rewrite.remove_ops(b, i)
    targets = _wrap_targets(p, targets)
    p = inference_optimize(p._prune_with_input(feeds, targets))
    b = p.global_block()
    for i, name in enumerate(feeds):
        if not b.has_var(name):
            raise ProgramError(f"feed variable #{i} '{name}' is not needed to compute the "
                               f"targets {targets}; remove it from the feeds")
    _check_inputs(p, feeds)
    if feeds:
        holder = b.create_var(name="feed", type=VarType.FEED_MINIBATCH, persistable=True)
        for col, name in enumerate(feeds):  # each prepended: reverse col order, as Paddle
            rewrite.insert_op(b, 0, "feed", {"X": holder}, {"Out": name},
                              {"col": col, "op_role": OpRole.Forward})
    holder = b.create_var(name="fetch", type=VarType.FETCH_LIST, persistable=True)
    for col, name in enumerate(targets):
        b.append_op("fetch", {"X": name}, {"Out": holder}, {"col": col}, infer_shape=False)
    _clip_extra(p)
    return p, targets


def _clip_extra(program):
    """Drop attributes Paddle 2.x clips from saved models (`op_callstack`: source paths)."""
    for block in program.blocks:
        for op in block.ops:
            rewrite.remove_attrs(op, ("op_callstack", "with_quant_attr"))


def write_program(path, program):
    data = program.serialize_to_string()
    ser.atomic_write(path, lambda f: f.write(data))


# ---------------------------------------------------------------------------------------
# inference models
# ---------------------------------------------------------------------------------------
def save_inference_model(dirname, feeded_var_names, target_vars, executor, main_program=None,
                         model_filename=None, params_filename=None, export_for_deployment=True,
                         program_only=False):
    """Fluid 1.x: write `dirname/__model__` (or model_filename) — the program pruned to
    `target_vars` given `feeded_var_names`, with feed/fetch ops — then its persistables
    (separate files, or one `params_filename`). Returns the fetch target names.

    `main_program` may be a CompiledProgram (its program is saved). With
    export_for_deployment=False the whole program is written (`<model>.main_program`), the
    feeds and targets unchecked, as Fluid does.

    Called Paddle-2.x style, with Variables as feeds (`save_inference_model(path_prefix,
    feed_vars, fetch_vars, executor)`), it writes `<prefix>.pdmodel` + `<prefix>.pdiparams`."""
    fv = feeded_var_names if isinstance(feeded_var_names, (list, tuple)) else [feeded_var_names]
    if fv and all(isinstance(v, Variable) for v in fv):
        return save_inference_model_v2(dirname, fv, target_vars, executor,
                                       program=main_program)
    feeds = _names(feeded_var_names, "feeded_var_names", allow_vars=False)
    targets = _names(target_vars, "target_vars")
    if not targets and export_for_deployment:
        raise ValueError("save_inference_model: 'target_vars' should be a list of Variable "
                         "(it is empty)")
    main_program = as_program(main_program)
    if any(op.type == "auc" for op in main_program.global_block().ops):
        warnings.warn("please ensure that you have set the auc states to zeros before saving "
                      "inference model")
    model_name = os.path.basename(model_filename or MODEL_FILENAME)
    if export_for_deployment:
        program, fetch_names = normalize_program(main_program, feeds, targets)
    else:
        program = main_program.clone()
        fetch_names = _wrap_targets(program, targets)
        model_name += ".main_program"
    with atomic.StagedDirectory(dirname) as stage:
        write_program(os.path.join(stage.path, model_name), program)
        if not program_only:
            write_vars(executor, stage.path, select(program, None, is_persistable),
                       os.path.basename(params_filename) if params_filename else None)
    return fetch_names


def _finish_load(program, executor, dirname, params_filename):
    read_vars(executor, dirname, select(program, None, is_persistable), params_filename)
    return _loaded(program, dirname)


def _loaded(program, where):
    """[program, feed target names, fetch target variables] of a loaded model."""
    try:
        feeds = get_feed_target_names(program)
        fetches = get_fetch_target_names(program)
    except ProgramError as e:
        raise ProgramError(f"{where}: {e}") from None
    return [program, feeds, [program.global_block().var(n) for n in fetches]]


def load_inference_model(dirname, executor, model_filename=None, params_filename=None,
                         pserver_endpoints=None):
    """Load an inference model and its parameters (into the global scope). Returns
    [program, feed_target_names, fetch_targets]. `dirname` is a directory holding
    `__model__` (or `model_filename`), or a Paddle 2.x prefix with `<prefix>.pdmodel`."""
    if dirname is None:
        return _load_from_memory(executor, model_filename, params_filename)
    path = os.path.normpath(os.fspath(dirname))
    atomic.settle(*os.path.split(os.path.abspath(path)))  # a directory or a file group
    is_dir = os.path.isdir(path)
    if not (is_dir and (model_filename or os.path.exists(os.path.join(path, MODEL_FILENAME)))) \
            and os.path.isfile(path + ".pdmodel"):
        return load_inference_model_v2(path, executor, model_filename, params_filename)
    if not is_dir:
        raise FluidityError(f"{path}: no inference model here: neither a directory with "
                            f"{MODEL_FILENAME} nor a prefix of {path}.pdmodel")
    with atomic.reading(path) as d:
        model_path = os.path.join(d, os.path.basename(model_filename or MODEL_FILENAME))
        program = load_program(model_path)
        check_program(program, model_path)
        return _finish_load(program, executor, d,
                            os.path.basename(params_filename) if params_filename else None)


def _load_from_memory(executor, model_bytes, params_bytes):
    """Fluid 1.8's in-memory load: `model_bytes` a serialized ProgramDesc (checked as a file's
    would be), `params_bytes` its persistables' combined records."""
    if params_bytes is None:
        raise ValueError("The path of params cannot be None when the directory path is None.")
    if not isinstance(model_bytes, (bytes, bytearray)) or \
            not isinstance(params_bytes, (bytes, bytearray)):
        raise TypeError("load_inference_model(None, executor, model, params): model and "
                        "params must be the bytes of a program and of its parameters")
    program = Program(desc_check.parse_program_desc(bytes(model_bytes), "<memory>"))
    check_program(program, "<memory>")
    vars_from_bytes(bytes(params_bytes), select(program, None, is_persistable))
    return _loaded(program, "in-memory model")


def save_inference_model_v2(path_prefix, feed_vars, fetch_vars, executor, program=None,
                            **kwargs):
    """Paddle 2.x (`paddle.static.save_inference_model`): `<prefix>.pdmodel` and, when the
    model has persistables, `<prefix>.pdiparams` (all of them, sorted by name)."""
    path_prefix = os.fspath(path_prefix)
    if not path_prefix or path_prefix.endswith(("/", os.sep)):
        raise FluidityError(f"path_prefix '{path_prefix}' must be a directory plus a file name "
                            f"prefix, not a directory")
    path_prefix = os.path.abspath(path_prefix)
    for ext in (".pdmodel", ".pdiparams"):
        if os.path.isdir(path_prefix + ext):
            raise FluidityError(f"{path_prefix + ext}: is an existing directory")
    feeds = _names(feed_vars, "feed_vars")
    targets = _names(fetch_vars, "fetch_vars")
    if not targets:
        raise FluidityError("save_inference_model: fetch_vars is empty")
    prog, fetch_names = normalize_program(as_program(program), feeds, targets)
    d, base = os.path.split(path_prefix)
    with atomic.StagedFiles(d, base) as stage:
        write_program(os.path.join(stage.path, base + ".pdmodel"), prog)
        params = select(prog, None, is_persistable)
        if params:
            write_vars(executor, stage.path, params, base + ".pdiparams")
    return fetch_names


def load_inference_model_v2(path_prefix, executor, model_filename=None, params_filename=None):
    """Load `<prefix>.pdmodel` and `<prefix>.pdiparams` (or the given file names)."""
    path_prefix = os.path.abspath(os.fspath(path_prefix))
    d = os.path.dirname(path_prefix)
    model = os.path.join(d, model_filename) if model_filename else path_prefix + ".pdmodel"
    params = os.path.join(d, params_filename) if params_filename else path_prefix + ".pdiparams"
    with atomic.reading(d, os.path.basename(path_prefix)):
        program = load_program(model)
        check_program(program, model)
        return _finish_load(program, executor, os.path.dirname(params),
                            os.path.basename(params))

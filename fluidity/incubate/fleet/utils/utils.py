"""Fluid 1.8's `fleet.utils.utils`: the checks a CTR team runs on a pruned inference program
before shipping it: programs read and written as binary or protobuf text (`load_program`,
`save_program`, `program_type_trans`), the pruned program's persistables against the
training program's (`check_pruned_program_vars`), a dump of its variables and ops
(`parse_program`), a DOT drawing (`graphviz`), and a trial run of the saved model on fed or
random inputs (`check_saved_vars_try_dump`).

A program file is checked as any other (a corrupt one raises ValueError naming the file);
text files are protobuf text format, Paddle's `.pbtxt`, so Paddle's files load here and ours
there.
"""
import logging
import os
from collections import OrderedDict

import numpy as np
from google.protobuf import text_format

from ....core.dtypes import VarType
from ....framework import Program
from ....io.variables import is_persistable
from ....proto import framework_pb2

__all__ = ["load_program", "save_program", "program_type_trans", "check_saved_vars_try_dump",
           "parse_program", "check_pruned_program_vars", "graphviz"]

logger = logging.getLogger("fluidity.fleet_utils")

persistable_vars_out_fn = "vars_persistable.log"
all_vars_out_fn = "vars_all.log"
ops_out_fn = "ops.log"

feed_fetch_type_list = [VarType.FEED_MINIBATCH, VarType.FETCH_LIST]
# ops a pruned inference program should no longer hold (its embeddings served elsewhere)
not_expected_op_types = ["lookup_table"]


def load_program(model_filename, is_text=False):
    return load_program_text(model_filename) if is_text else load_program_binary(model_filename)


def load_program_binary(model_filename):
    """A Program from a serialized ProgramDesc file."""
    with open(model_filename, "rb") as f:
        data = f.read()
    try:
        return Program.parse_from_string(data)
    except ValueError as e:
        raise ValueError(f"{model_filename}: not a binary ProgramDesc ({e})") from None


def load_program_text(model_filename):
    """A Program from a ProgramDesc in protobuf text format (a .pbtxt file)."""
    with open(model_filename, "r") as f:
        text = f.read()
    desc = framework_pb2.ProgramDesc()
    try:
        text_format.Merge(text, desc)
    except text_format.ParseError as e:
        raise ValueError(f"{model_filename}: not a ProgramDesc in protobuf text format "
                         f"({e})") from None
    return Program.parse_from_string(desc.SerializeToString())


def save_program(program, model_filename="__model__", is_text=False):
    if is_text:
        with open(model_filename, "w") as f:
            f.write(text_format.MessageToString(program.desc))
    else:
        with open(model_filename, "wb") as f:
            f.write(program.desc.SerializeToString())


def program_type_trans(prog_dir, prog_fn, is_text):
    """Write `prog_dir/prog_fn` in the other form (text -> `<prog_fn>.bin`, binary ->
    `<prog_fn>.pbtxt`); returns the new file's name."""
    prog = load_program(os.path.join(prog_dir, prog_fn), is_text)
    out_fn = prog_fn + (".bin" if is_text else ".pbtxt")
    save_program(prog, os.path.join(prog_dir, out_fn), not is_text)
    return out_fn


def check_pruned_program_vars(train_prog, pruned_prog):
    """True when every persistable of `pruned_prog` is in `train_prog`'s global block with
    the same shape and dtype (each mismatch is logged)."""
    is_match = True
    pruned = OrderedDict((v.name, v) for v in pruned_prog.list_vars() if is_persistable(v))
    logger.info("persistable vars in pruned program: %s", list(pruned))
    train_vars = train_prog.global_block().vars
    for name, var in pruned.items():
        if var.type in feed_fetch_type_list:
            continue
        train_var = train_vars.get(name)
        if train_var is None:
            logger.error("not find variable '%s' in train program. please check pruning.", name)
            continue
        if list(var.shape) != list(train_var.shape) or var.dtype != train_var.dtype:
            logger.error("variable: %s not match. in pruned program shape: %s dtype:%s, in "
                         "train program shape: %s dtype: %s", name, var.shape, var.dtype,
                         train_var.shape, train_var.dtype)
            is_match = False
    return is_match


def graphviz(block, output_dir="", filename="debug"):
    """Draw `block` to `<output_dir>/<filename>.dot` (and `.pdf` when Graphviz's `dot` is
    installed)."""
    from ....debugger import draw_block_graphviz
    draw_block_graphviz(block, path=os.path.join(output_dir, filename + ".dot"))


def _reader(batch_size, fn, dim):
    """The batches of file `fn` (numbers separated by spaces, any line breaks), each
    [batch_size] + dim."""
    shape = [batch_size] + (list(dim) if isinstance(dim, (list, tuple)) else [dim])
    n = int(np.prod(shape))
    values = []
    with open(fn) as f:
        for line in f:
            try:
                values.extend(float(x) for x in line.split())
            except ValueError:
                raise ValueError(f"{fn}: {line.strip()[:60]!r} is not a line of numbers") \
                    from None
    k = len(values) // n
    return [np.array(values[i * n:(i + 1) * n]).reshape(shape) for i in range(k)]


def _drop_ops(block, op_type):
    for i in reversed(range(len(block.ops))):
        if block.ops[i].type == op_type:
            block._remove_op(i)


def _check_feed_shapes(program, feed_config):
    names, dims = feed_config.feeded_vars_names, feed_config.feeded_vars_dims
    types = feed_config.feeded_vars_types
    if not len(names) == len(dims) == len(types):
        raise ValueError(f"feed_config: feeded_vars_names ({len(names)}), feeded_vars_dims "
                         f"({len(dims)}) and feeded_vars_types ({len(types)}) differ in length")
    block = program.global_block()
    for i, name in enumerate(names):
        if name not in block.vars:
            raise ValueError(f"feed variable '{name}' is not in the program")
        shape = tuple(dims[i]) if isinstance(dims[i], (list, tuple)) else (dims[i],)
        dims[i] = shape
        var_shape = tuple(block.var(name).shape[1:])
        if shape != var_shape:
            raise RuntimeError(f"feed variable '{name}' shape not match. infer program  shape: "
                               f"{var_shape}. feed tensor shape: {shape}")


def _feed(program, feed_config, batch_size, names):
    from .... import core
    block = program.global_block()
    feed = {}
    if feed_config.feeded_vars_filelist:
        logger.info("load feed vars from files: %s", feed_config.feeded_vars_filelist)
        for i, name in enumerate(feed_config.feeded_vars_names):
            batches = _reader(batch_size, feed_config.feeded_vars_filelist[i],
                              feed_config.feeded_vars_dims[i])
            if not batches:
                raise ValueError(f"{feed_config.feeded_vars_filelist[i]}: fewer numbers than "
                                 f"one batch of '{name}' needs")
            arr = np.concatenate(batches).astype(feed_config.feeded_vars_types[i])
            lod = block.var(name).lod_level
            feed[names[i]] = core.LoDTensor(arr, [list(range(len(arr) + 1))]) if lod == 1 \
                else arr
        return feed
    logger.info("generate random feed vars.")
    for i, name in enumerate(feed_config.feeded_vars_names):
        var = block.var(name)
        shape = (batch_size,) + tuple(feed_config.feeded_vars_dims[i])
        arr = np.random.random(shape).astype(feed_config.feeded_vars_types[i])
        if var.lod_level == 0:
            feed[names[i]] = arr
        elif var.lod_level == 1:
            feed[names[i]] = core.LoDTensor(arr, [list(range(batch_size + 1))])
        else:
            raise RuntimeError("vars with lod_level >= 2 is not supported now in this infer "
                               "program check tool.")
    return feed


def try_load_model_vars(dump_dir, dump_prog_fn, is_text_dump_program, batch_size,
                        feed_config, fetch_config, save_filename, saved_params):
    """Load the model saved in `dump_dir`, check its parameters' shapes against the program,
    run it once on `feed_config`'s inputs and return the fetched values."""
    from .... import executor as executor_mod
    from ....core import CPUPlace, Scope
    from ....executor import scope_guard
    from ....io import load_inference_model
    exe = executor_mod.Executor(CPUPlace())
    scope = Scope()
    with scope_guard(scope):
        if is_text_dump_program:
            dump_prog_fn = program_type_trans(dump_dir, dump_prog_fn, is_text_dump_program)
        program, feed_names, fetch_targets = load_inference_model(
            dump_dir, exe, model_filename=dump_prog_fn, params_filename=save_filename)
        for var in saved_params:
            held = scope.find_var(var.name)
            if held is None:
                raise RuntimeError(f"can't not find var: {var.name}")
            got = tuple(np.array(held.get_tensor()).shape)
            if got != tuple(var.shape):
                raise RuntimeError(f"Shape not matching: the Program requires a parameter "
                                   f"with a shape of ({tuple(var.shape)}), while the loaded "
                                   f"parameter (namely [ {var.name} ]) has a shape of  "
                                   f"({got}).")
        fetch_names = [v.name for v in fetch_targets]
        if not feed_names:
            logger.warning("no feed targets in program.")
        if not fetch_names:
            logger.warning("no fetch targets in program.")
        fetch_list, names = fetch_targets, feed_names
        block = program.global_block()
        wanted = feed_config.feeded_vars_names
        if wanted is not None and list(feed_names) != list(wanted):
            logger.warning("feed vars in program and config are diff: feed in program: %s. "
                           "feed in config %s.", feed_names, wanted)
            names = list(wanted)
            _drop_ops(block, "feed")
        wanted = fetch_config.fetch_vars_names
        if wanted is not None and fetch_names != list(wanted):
            logger.warning("fetch vars in program and config are diff: fetch in program: %s. "
                           "fetch in config %s.", fetch_names, wanted)
            missing = [n for n in wanted if n not in block.vars]
            if missing:
                raise ValueError(f"fetch variables {missing} are not in the program")
            fetch_list = [block.var(n) for n in wanted]
            _drop_ops(block, "fetch")
        return_numpy = all(v.lod_level == 0 for v in fetch_list)
        _check_feed_shapes(program, feed_config)
        feed = _feed(program, feed_config, batch_size, names)
        results = exe.run(program, feed=feed, fetch_list=fetch_list, return_numpy=return_numpy)
        for v, r in zip(fetch_list, results):
            logger.info("fetch_targets name: %s", v.name)
            logger.info("fetch_targets: %s", r)
        return results


def check_not_expected_ops(prog):
    seen = set()
    for op in prog.global_block().ops:
        if op.type in not_expected_op_types and op.type not in seen:
            logger.warning("find op type '%s' in program, please check if your program is "
                           "pruned correctly !", op.type)
            seen.add(op.type)


def check_saved_vars_try_dump(dump_dir, dump_prog_fn, is_text_dump_program, feed_config,
                              fetch_config, batch_size=1, save_filename=None):
    """Load the pruned program `dump_dir/dump_prog_fn` and the parameters saved beside it,
    check them, and run it once (`try_load_model_vars`); returns the fetched values."""
    dump_prog = load_program(os.path.join(dump_dir, dump_prog_fn), is_text_dump_program)
    saved_params = [v for v in dump_prog.list_vars() if is_persistable(v)]
    logger.info("persistable vars in dump program: %s", [v.name for v in saved_params])
    check_not_expected_ops(dump_prog)
    return try_load_model_vars(dump_dir, dump_prog_fn, is_text_dump_program, batch_size,
                               feed_config, fetch_config, save_filename, saved_params)


def _var_facts(v, with_type):
    d = {"name": str(v.name), "shape": str(tuple(v.shape)), "lod_level": int(v.lod_level),
         "dtype": str(v.dtype)}
    if with_type:
        d["type"] = str(v.type)
    return d


def parse_program(program, output_dir):
    """Write `program`'s persistables (vars_persistable.log), all its variables
    (vars_all.log) and its global block's ops (ops.log) to `output_dir`, one dict a line."""
    persistable = [_var_facts(v, True) for v in program.list_vars() if is_persistable(v)]
    all_vars = [_var_facts(v, False) if v.type not in feed_fetch_type_list
                else {"name": str(v.name), "type": str(v.type)} for v in program.list_vars()]
    ops = [{"type": op.type, "input_arg_names": str(op.input_arg_names),
            "output_arg_names": str(op.output_arg_names)} for op in program.global_block().ops]
    for fn, head, rows in ((persistable_vars_out_fn, "persistable vars:", persistable),
                           (all_vars_out_fn, "all vars:", all_vars), (ops_out_fn, "ops:", ops)):
        with open(os.path.join(output_dir, fn), "w") as f:
            f.write(head + "\n")
            for row in rows:
                f.write(f"{row}\n")

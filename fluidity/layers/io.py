"""Input layers."""
from ..core.dtypes import VarType
from ..framework import default_main_program

from .. import unique_name
from ..errors import FluidityError
from ..reader import program as reader_program

__all__ = ["data"]


def data(name, shape, append_batch_size=True, dtype="float32", lod_level=0, type=None,
         stop_gradient=True):
    """A fed input variable (Fluid 1.x's `fluid.layers.data`, its argument order). With
    append_batch_size, a -1 batch dim is prepended unless a dim is already None or -1;
    `fluid.data` (fluidity/layers/input.py) passes the full shape without it.

    As in Fluid 1.x, its `need_check_feed` is off: what is fed goes to the ops as it is
    (a `[6]` label fed to `shape=[1]` stays `[6]`), whatever the declared shape; each op
    then checks what it reads. `fluid.data` variables are checked at the feed."""
    shape = [-1 if d is None else int(d) for d in shape]
    if append_batch_size and all(d >= 0 for d in shape):   # a None or -1 anywhere: as given
        shape = [-1] + shape
    block = default_main_program().global_block()
    var = block.create_var(name=name, shape=shape, dtype=dtype, lod_level=lod_level,
                           type=type if type is not None else VarType.LOD_TENSOR,
                           stop_gradient=stop_gradient, need_check_feed=False)
    var.is_data = True
    return var


# --- readers (Paddle's py_reader & co.; the program layout is in reader/program.py) ---------
__all__ += ["py_reader", "create_py_reader_by_data", "read_file", "double_buffer",
            "open_files", "batch", "shuffle", "load"]


def _patch_reset(var):
    """Give a reader variable Paddle's `reset()`: restart its reader stack."""
    var.reset = lambda: reader_program.reset_scope_reader(var.name)
    return var


def _patch_py_reader(var, control):
    return control.bind(var)


def _py_reader(capacity, specs, name, use_double_buffer, need_check_feed=None):
    reader, feeder = reader_program.add_queue_reader(specs, capacity, name, need_check_feed)
    control = reader_program.PyReaderControl(feeder, reader_program.slots_of_specs(specs),
                                             reader.name)
    if use_double_buffer:
        reader = reader_program.add_decorated_reader(
            "create_double_buffer_reader", reader,
            name=f"{name}_double_buffer" if name else None)
    return _patch_py_reader(reader, control)


def py_reader(capacity, shapes, dtypes, lod_levels=None, name=None, use_double_buffer=True):
    """A reader variable fed from Python through a queue of `capacity` batches.

    `decorate_paddle_reader(r)` / `decorate_sample_list_generator(r)` (r yields lists of
    samples) or `decorate_tensor_provider(r)` / `decorate_batch_generator(r)` (r yields
    lists of arrays or LoDTensors) set the source; `read_file(reader)` gives the data
    variables; per pass: `reader.start()`, run until `fluid.core.EOFException`, then
    `reader.reset()`. An exception the generator raises is raised by `exe.run`."""
    specs = reader_program.specs_of(shapes, dtypes, lod_levels)
    return _py_reader(capacity, specs, name, use_double_buffer)


def create_py_reader_by_data(capacity, feed_list, name=None, use_double_buffer=True):
    """py_reader whose shapes, dtypes and lod levels are those of the data variables
    `feed_list` (their shapes are checked when read)."""
    specs = [(tuple(v.shape), v.dtype, v.lod_level) for v in feed_list]
    return _py_reader(capacity, specs, name, use_double_buffer,
                      [int(v.need_check_feed) for v in feed_list])


def read_file(reader):
    """The data variables of the next batch of `reader` (one variable, or a list)."""
    block = default_main_program().current_block()
    outs = [block.create_var(name=unique_name.generate("read_file"), shape=shape, dtype=dtype,
                             lod_level=lod_level, stop_gradient=True)
            for shape, dtype, lod_level in reader_program.reader_specs(reader)]
    block.append_op(type="read", inputs={"Reader": [reader]}, outputs={"Out": outs})
    return outs[0] if len(outs) == 1 else outs


def _decorated(op_type, reader, attrs=None, name=None):
    out = reader_program.add_decorated_reader(op_type, reader, attrs, name)
    control = getattr(reader, "control", None)
    return _patch_py_reader(out, control) if control is not None else _patch_reset(out)


def double_buffer(reader, place=None, name=None):
    """`reader` read ahead on a background thread."""
    return _decorated("create_double_buffer_reader", reader,
                      {"place": str(place) if place is not None else ""}, name)


def shuffle(reader, buffer_size):
    """`reader`'s batches shuffled within a buffer of `buffer_size`."""
    return _decorated("create_shuffle_reader", reader, {"buffer_size": int(buffer_size)})


def batch(reader, batch_size):
    """Batches of `batch_size` of `reader`'s batches (a short last one dropped)."""
    return _decorated("create_batch_reader", reader, {"batch_size": int(batch_size)})


def open_files(filenames, shapes, lod_levels, dtypes, thread_num=None, buffer_size=None,
               pass_num=1, is_test=None):
    """A reader of MultiSlot text files: one slot per tensor (int dtypes: uint64 ids, float
    dtypes: float values; lod_level 0 dense, 1 a sequence), one instance per line, read by
    `thread_num` threads (default: one per file, at most 4). `fluid.layers.batch` joins
    instances into batches."""
    if isinstance(filenames, str):
        filenames = [filenames]
    if pass_num != 1:
        raise FluidityError("open_files: pass_num other than 1 is not supported; reset() "
                            "the reader for each pass")
    specs = reader_program.specs_of(shapes, dtypes, lod_levels)
    for _, _, lv in specs:
        if lv > 1:
            raise FluidityError("open_files: MultiSlot files hold lod_level 0 or 1 slots")
    threads = thread_num if thread_num is not None else min(len(filenames), 4)
    attrs = {"file_names": list(filenames), "thread_num": int(threads),
             "buffer_size": int(buffer_size or 64)}
    var = reader_program.add_source_reader("open_files", unique_name.generate("open_files"),
                                           specs, attrs=attrs)
    return _patch_reset(var)


def load(out, file_path, load_as_fp16=None):
    """Append a `load` op: `out` is read from the tensor file `file_path` when the program
    runs."""
    attrs = {"file_path": file_path}
    if load_as_fp16 is not None:
        attrs["load_as_fp16"] = bool(load_as_fp16)
    default_main_program().current_block().append_op(type="load", inputs={},
                                                     outputs={"Out": [out]}, attrs=attrs)


# Fluid's low-level RPC layers live in layers.io (not in its __all__, as in Fluid)
from .rpc import ListenAndServ, Recv, Send  # noqa: E402,F401

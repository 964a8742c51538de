"""Readers in a program: the READER variables and reader ops that `fluid.layers.py_reader`,
`read_file`, `double_buffer`, `open_files`, `batch`, `shuffle` and the non-iterable
`DataLoader` / `PyReader` add, as Paddle lays them out:

* a reader that sources data (`create_py_reader`, `open_files`) is made by the *startup*
  program into a persistable READER variable; the main program declares the same variable;
* decorated readers (`create_double_buffer_reader`, ...) are ops of the *main* program over a
  persistable Out; they make their reader on the first run and keep it;
* `read` writes the next batch into the data variables.

The queue a py_reader's Python thread fills lives in `fluid.global_scope()`, in a variable
the startup program names (`blocking_queue`). `PyReaderControl` is what the user drives:
`decorate_*` sets the generator, `start()` starts the feeding thread, `reset()` stops it and
restarts the reader stack for the next pass.
"""
from .. import unique_name
from ..core import dtypes
from ..core.dtypes import VarType
from ..core.reader import Reader
from ..core.scope import global_scope
from ..errors import FluidityError
from ..framework import default_main_program, default_startup_program
from . import feeding


def set_reader_specs(var, specs):
    """Record [(shape, dtype code, lod_level)] in a READER VarDesc (Paddle's ReaderDesc)."""
    rd = var.desc.type.reader
    del rd.lod_tensor[:]
    for shape, dtype, lod_level in specs:
        lt = rd.lod_tensor.add()
        lt.tensor.data_type = dtype
        lt.tensor.dims.extend(int(d) for d in shape)
        lt.lod_level = int(lod_level)


def reader_specs(var):
    """[(shape, dtype code, lod_level)] of a READER variable."""
    if var.type != VarType.READER:
        raise FluidityError(f"'{var.name}' is not a reader variable")
    return [(tuple(lt.tensor.dims), lt.tensor.data_type, lt.lod_level)
            for lt in var.desc.type.reader.lod_tensor]


def reader_var(block, name, specs):
    v = block.create_var(name=name, type=VarType.READER, persistable=True, stop_gradient=True)
    set_reader_specs(v, specs)
    return v


def file_reader_attrs(specs, need_check_feed=None):
    shape_concat, ranks = [], []
    for shape, _, _ in specs:
        shape_concat.extend(int(d) for d in shape)
        ranks.append(len(shape))
    return {"shape_concat": shape_concat, "ranks": ranks,
            "lod_levels": [int(lv) for _, _, lv in specs],
            "dtypes": [int(d) for _, d, _ in specs],
            "need_check_feed": list(need_check_feed or [0] * len(specs))}


def add_source_reader(op_type, name, specs, inputs=None, attrs=None):
    """A source reader made by the startup program into `name`, declared in the main program
    too; returns the main program's variable."""
    startup = default_startup_program().current_block()
    var = reader_var(startup, name, specs)
    startup.append_op(type=op_type, inputs=inputs or {}, outputs={"Out": [var]},
                      attrs=dict(file_reader_attrs(specs), **(attrs or {})))
    return reader_var(default_main_program().current_block(), name, specs)


def add_decorated_reader(op_type, reader, attrs=None, name=None, index=None):
    """A decorated reader op of the main program over `reader`; returns its Out variable.
    `index` inserts the op there instead of appending it."""
    block = default_main_program().current_block()
    out = reader_var(block, name or unique_name.generate(op_type), reader_specs(reader))
    at = len(block.ops) if index is None else index
    block._insert_op(at, type=op_type, inputs={"UnderlyingReader": [reader]},
                     outputs={"Out": [out]}, attrs=attrs or {})
    return out


def add_queue_reader(specs, capacity, name=None, need_check_feed=None, main_index=None,
                     name_generator=None):
    """A py_reader source: a BlockingQueue of `capacity` in the global scope and the
    create_py_reader op over it: in the startup program (fluid.layers.py_reader), or with
    `main_index` at that index of the main program (Fluid 1.8's DataLoader and PyReader,
    keep_order: the program makes its reader itself, no startup run needed). Unnamed, the
    queue and reader are named by `name_generator` (default: `unique_name.generate`).
    Returns (main program reader variable, feeder)."""
    base = name
    generate = name_generator or unique_name.generate
    queue_name = f"{base}_queue" if base else generate("lod_tensor_blocking_queue")
    reader_name = f"{base}_reader" if base else generate("create_py_reader")
    feeder = feeding.QueueFeeder(capacity)
    global_scope().var(queue_name).value = feeder.queue
    block = default_startup_program().current_block() if main_index is None else \
        default_main_program().current_block()
    qvar = block.create_var(name=queue_name, type=VarType.RAW, persistable=True)
    var = reader_var(block, reader_name, specs)
    attrs = file_reader_attrs(specs, need_check_feed)
    at = len(block.ops) if main_index is None else main_index
    block._insert_op(at, type="create_py_reader", inputs={"blocking_queue": [qvar]},
                     outputs={"Out": [var]}, attrs=attrs)
    return reader_var(default_main_program().current_block(), reader_name, specs), feeder


def first_use(outputs):
    """The index of the first op of the main program's current block that reads one of
    `outputs` (the end of the block when none does): where their `read` op goes, so that the
    network may be built before or after the reader."""
    block = default_main_program().current_block()
    names = {v.name for v in outputs}
    for i, op in enumerate(block.ops):
        if names & set(op.input_arg_names):
            return i
    return len(block.ops)


def insert_read(reader, outputs, index, drop_last=True):
    """A `read` op of the main program from `reader` into `outputs`, at `index`."""
    block = default_main_program().current_block()
    return block._insert_op(index, type="read", inputs={"Reader": [reader]},
                            outputs={"Out": list(outputs)},
                            attrs={"drop_last": bool(drop_last)})


def reset_scope_reader(name):
    var = global_scope().find_var(name)
    if var is not None and isinstance(var.value, Reader):
        var.value.reset()


class PyReaderControl:
    """The Python side of a program's py_reader: its data source and feeding thread."""

    METHODS = ("start", "reset", "decorate_paddle_reader", "decorate_tensor_provider",
               "decorate_sample_list_generator", "decorate_batch_generator",
               "decorate_sample_generator")

    def __init__(self, feeder, slots, reader_name):
        self.feeder = feeder
        self.slots = slots
        self.reader_name = reader_name
        self._vars = []

    def bind(self, var):
        """Give the reader variable `var` Fluid's py_reader methods and attributes (`start`,
        `reset`, `decorate_*`, `queue`, `thread`: the feeding thread while a pass is under
        way, else None; `exited`); returns `var`."""
        for name in self.METHODS:
            setattr(var, name, getattr(self, name))
        var.queue = self.queue
        var.control = self
        var.thread = None
        var.exited = False
        self._vars.append(var)
        return var

    def _publish_thread(self):
        for var in self._vars:
            var.thread = self.feeder.thread

    @property
    def queue(self):
        return self.feeder.queue

    def decorate_batch_generator(self, reader, places=None):
        """`reader()` yields batches: lists of ndarrays / LoDTensors in slot order."""
        slots = self.slots
        self.feeder.set_source(reader, lambda b: feeding.batch_to_tensors(b, slots))

    decorate_tensor_provider = decorate_batch_generator

    def decorate_sample_list_generator(self, reader, places=None):
        """`reader()` yields lists of samples (a paddle.batch'ed reader)."""
        slots = self.slots
        self.feeder.set_source(reader, lambda s: feeding.samples_to_tensors(s, slots))

    decorate_paddle_reader = decorate_sample_list_generator

    def decorate_sample_generator(self, sample_generator, batch_size, drop_last=True,
                                  places=None):
        self.decorate_sample_list_generator(
            feeding.batch_samples(sample_generator, batch_size, drop_last))

    def start(self):
        self.feeder.start()
        self._publish_thread()

    def reset(self):
        """Stop the feeding thread and restart the reader stack: the next start() begins a
        new pass."""
        self.feeder.stop()
        reset_scope_reader(self.reader_name)
        self.feeder.queue.reopen()
        self._publish_thread()


def specs_of(shapes, dtype_list, lod_levels):
    if len(shapes) != len(dtype_list):
        raise FluidityError(f"{len(shapes)} shapes but {len(dtype_list)} dtypes")
    lod_levels = list(lod_levels) if lod_levels is not None else [0] * len(shapes)
    if len(lod_levels) != len(shapes):
        raise FluidityError(f"{len(shapes)} shapes but {len(lod_levels)} lod_levels")
    return [(tuple(int(d) for d in s), dtypes.to_code(t), int(lv))
            for s, t, lv in zip(shapes, dtype_list, lod_levels)]


def slots_of_specs(specs):
    return [feeding.Slot(f"slot{i}", shape, dtypes.to_numpy(d), lv)
            for i, (shape, d, lv) in enumerate(specs)]

"""Reader ops: make readers into READER variables and read batches out of them.

Op types, slots and attributes are Paddle's:

* `create_py_reader` (blocking_queue -> Out): a reader over the BlockingQueue held by the
  variable named in `blocking_queue` (a Python thread fills it; `fluid.layers.py_reader`).
* `open_files` (-> Out): a reader of MultiSlot text files with `thread_num` reading threads,
  one instance per batch (decorate it with `create_batch_reader`).
* `create_double_buffer_reader`, `create_shuffle_reader`, `create_batch_reader`
  (UnderlyingReader -> Out): decorated readers. They run in the main program every step, and
  make their reader only when Out does not already decorate that underlying reader.
* `read` (Reader -> Out...): the next batch into the Out variables; at the end of the data
  it raises `fluid.core.EOFException` (`throw_eof_exp`).

The readers themselves live in `core/reader.py` (and `datafeed/file_reader.py`).
"""
import numpy as np

from ..core import dtypes
from ..core.reader import (BatchReader, BlockingQueue, DoubleBufferReader, EOFException,
                           QueueReader, Reader, ShuffleReader)
from ..core.tensor import LoDTensor
from ..errors import ExecutionError, FeedError
from .registry import In, OpDef, Out, ints, strings

# Paddle's FileReaderMakerBase attributes: the reader's tensors, shapes concatenated
_FILE_READER_ATTRS = {"shape_concat": ints(), "ranks": ints(), "lod_levels": ints(),
                      "dtypes": ints(), "need_check_feed": ints()}


def reader_specs(attrs):
    """[(shape, dtype code, lod_level)] of a file reader's tensors from its attributes."""
    shapes, at = [], 0
    for r in attrs["ranks"]:
        shapes.append(tuple(attrs["shape_concat"][at:at + r]))
        at += r
    return list(zip(shapes, attrs["dtypes"], attrs["lod_levels"]))


class CreatePyReader(OpDef):
    type = "create_py_reader"
    inputs = (In("blocking_queue"),)
    outputs = (Out("Out"),)
    attrs = dict(_FILE_READER_ATTRS, device_index=0, device_count=1)
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Out = a reader of the batches a Python thread pushes into the queue held by "
           "variable `blocking_queue` (fluid.layers.py_reader).")

    @staticmethod
    def make_step(p):
        qname, o = p.op.input("blocking_queue")[0], p.out_one("Out")
        check = batch_checker(p.op.output("Out")[0], reader_specs(p.attrs),
                              p.attrs["need_check_feed"])
        # in a program that reads its batches (a DataLoader's main program, Fluid 1.8's
        # keep_order) the op runs every step and makes the reader once; in a startup
        # program, running it again restarts the reader
        made_once = any(op.type == "read" for b in p.program.blocks for op in b.ops)

        def step(frame, env):
            var = env.scope.find_var(qname)
            q = var.value if var is not None else None
            if not isinstance(q, BlockingQueue):
                raise ExecutionError(
                    f"create_py_reader: no reader queue '{qname}' in the scope the program "
                    f"runs in: py_reader / DataLoader keep it in fluid.global_scope(), so run "
                    f"the program there (or in a kid scope of it)")
            old = frame[o].value
            if made_once and isinstance(old, QueueReader) and old.queue is q:
                return
            if isinstance(old, Reader):    # the startup program runs again: stop the old
                old.shutdown()             # stack (its threads read the same queue)
                if isinstance(old, QueueReader) and old.queue is q:
                    q.reopen()             # (another queue's feeder may be filling q)
            frame[o].value = QueueReader(q, check)
        return step


class OpenFiles(OpDef):
    type = "open_files"
    inputs = ()
    outputs = (Out("Out"),)
    attrs = dict(_FILE_READER_ATTRS, file_names=strings(), thread_num=1, buffer_size=64)
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Out = a reader of the instances of MultiSlot text files `file_names` (one slot "
           "per tensor: int types as uint64 ids, floats as float values; lod_level 0 = "
           "dense), read by `thread_num` threads into a buffer of `buffer_size`.")

    @staticmethod
    def make_step(p):
        from ..datafeed.file_reader import MultiSlotFilesReader
        o, files = p.out_one("Out"), list(p.attrs["file_names"])
        specs, threads, buf = reader_specs(p.attrs), p.attrs["thread_num"], p.attrs["buffer_size"]

        def step(frame, env):
            frame[o].value = MultiSlotFilesReader(files, specs, threads, buf)
        return step


def _decorator_step(p, make):
    """The step of a decorated-reader op: Out gets make(underlying) unless it already holds
    a reader over that underlying one (the op runs every step of the main program)."""
    u, o, name = p.in_one("UnderlyingReader"), p.out_one("Out"), p.op.input("UnderlyingReader")[0]
    op_type = p.op.type

    def step(frame, env):
        under = frame[u].value
        cur = frame[o].value
        if isinstance(cur, Reader) and cur.underlying is under:
            return
        if not isinstance(under, Reader):
            raise ExecutionError(f"{op_type}: '{name}' holds no reader (run the startup "
                                 f"program first)")
        frame[o].value = make(under)
    return step


class _Decorated(OpDef):
    inputs = (In("UnderlyingReader"),)
    outputs = (Out("Out"),)
    kind = "ctx"
    infer_shape = None
    share_lod = None


class CreateDoubleBufferReader(_Decorated):
    type = "create_double_buffer_reader"
    attrs = {"place": ""}
    doc = "Out reads ahead of its consumer on a background thread (two batches deep)."

    @staticmethod
    def make_step(p):
        return _decorator_step(p, DoubleBufferReader)


class CreateShuffleReader(_Decorated):
    type = "create_shuffle_reader"
    attrs = {"buffer_size": 0}
    doc = "Out hands out the underlying reader's batches shuffled within buffer_size."

    @staticmethod
    def make_step(p):
        n = p.attrs["buffer_size"]
        return _decorator_step(p, lambda r: ShuffleReader(r, n))


class CreateBatchReader(_Decorated):
    type = "create_batch_reader"
    attrs = {"batch_size": 0, "discard_leftover": True}
    doc = "Out concatenates batch_size of the underlying reader's batches into one."

    @staticmethod
    def make_step(p):
        n, drop = p.attrs["batch_size"], p.attrs["discard_leftover"]
        return _decorator_step(p, lambda r: BatchReader(r, n, drop))


def batch_checker(name, specs, need_check_feed):
    """check(batch): raise FeedError when a batch's tensors do not fit the reader's specs
    (count and dtype always; shape, -1 matching any size, where need_check_feed)."""
    want = [(dtypes.to_numpy(d), tuple(shape) if need else None)
            for (shape, d, _), need in zip(specs, list(need_check_feed) + [0] * len(specs))]

    def check(batch):
        if len(batch) != len(want):
            raise FeedError(f"reader '{name}': a batch of {len(batch)} tensors for "
                            f"{len(want)} variables")
        for k, (t, (dtype, shape)) in enumerate(zip(batch, want)):
            arr = t._array
            if arr.dtype != dtype:
                raise FeedError(f"reader '{name}': tensor {k} of a batch is {arr.dtype}, the "
                                f"variable is {np.dtype(dtype)}")
            if shape is not None and (len(shape) != arr.ndim or any(
                    s >= 0 and s != g for s, g in zip(shape, arr.shape))):
                raise FeedError(f"reader '{name}': tensor {k} of a batch has shape "
                                f"{list(arr.shape)}, the variable {list(shape)} (-1 = any)")
    return check


class Read(OpDef):
    type = "read"
    inputs = (In("Reader"),)
    outputs = (Out("Out", duplicable=True),)
    attrs = {"throw_eof_exp": True, "infer_out": True, "drop_last": True}
    kind = "ctx"
    infer_shape = None
    share_lod = None
    doc = ("Out... = the reader's next batch; at the end of the data raise "
           "fluid.core.EOFException (throw_eof_exp) or leave Out empty. drop_last=False: "
           "a data-parallel inference run whose later places find no batch runs the places "
           "that read one (Fluid's partial feed).")

    @staticmethod
    def make_step(p):
        r, rname = p.in_one("Reader"), p.op.input("Reader")[0]
        names = p.op.output("Out")
        outs = p.out_idx("Out")
        throw = p.attrs["throw_eof_exp"]

        def step(frame, env):
            reader = frame[r].value
            if not isinstance(reader, Reader):
                raise ExecutionError(f"read: '{rname}' holds no reader (run the startup "
                                     f"program first)")
            batch = reader.read_next()
            if batch is None:
                if throw:
                    raise EOFException(f"reader '{rname}' has no more data: call reset() "
                                       f"and start() for another pass")
                for i in outs:
                    frame[i].value = LoDTensor()
                return
            if len(batch) != len(outs):
                raise FeedError(f"read: the reader '{rname}' gave {len(batch)} tensors for "
                                f"{len(outs)} variables {names}")
            for i, t in zip(outs, batch):
                frame[i].value = t
        return step

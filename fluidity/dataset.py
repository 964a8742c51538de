"""Datasets for `Executor.train_from_dataset` (Paddle 1.4+): MultiSlot files read by Hogwild
workers.

    dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    dataset.set_use_var([dense, ids, label])     # data variables = the files' slots, in order
    dataset.set_batch_size(32); dataset.set_thread(2)
    dataset.set_filelist(files); dataset.set_pipe_command("cat")
    dataset.load_into_memory(); dataset.local_shuffle()
    exe.train_from_dataset(main, dataset, fetch_list=[loss])

`QueueDataset` streams its files; `InMemoryDataset` loads every instance (line) into memory
first, so it can be shuffled. Each file is piped through `pipe_command` (a shell command
reading the file on stdin and writing MultiSlot lines on stdout, "cat" by default) as Paddle
does; a command that fails stops with its exit status and stderr.

The workers are the AsyncExecutor's (executor/async_executor.py): threads running the
compiled training step when the whole program compiles, forked processes otherwise. They
read files, so what they read is materialized first when it is not the files themselves:
a QueueDataset with a pipe command pipes each file into a temporary file per run; an
InMemoryDataset writes its (shuffled) instances into one temporary file per worker, once per
state of the memory (kept until the memory changes or is released).

Differences from Paddle: id 0 in a sparse slot is kept (Paddle's InMemoryDataset drops it
silently, which changes sequence lengths); `global_shuffle` shuffles locally (one machine);
HDFS is not supported.
"""
import logging
import os
import random
import shutil
import subprocess
import tempfile
import weakref

from google.protobuf import text_format

from .core import dtypes
from .core.dtypes import VarType
from .datafeed import data_feed_pb2
from .datafeed.data_feed_desc import DataFeedDesc
from .datafeed.multislot import MultiSlotReader
from .executor.async_executor import batch_examples
from .errors import FluidityError

logger = logging.getLogger("fluidity")

__all__ = ["DatasetFactory", "QueueDataset", "InMemoryDataset"]

_SLOT_TYPE = {VarType.INT64: "uint64", VarType.FP32: "float"}  # as Paddle: no other dtypes


class DatasetFactory:
    """`DatasetFactory().create_dataset("QueueDataset" | "InMemoryDataset")`."""

    def create_dataset(self, datafeed_class="QueueDataset"):
        kinds = {"QueueDataset": QueueDataset, "InMemoryDataset": InMemoryDataset}
        if datafeed_class not in kinds:
            raise FluidityError(f"DatasetFactory: unknown dataset {datafeed_class!r}; one of "
                                f"{sorted(kinds)}")
        return kinds[datafeed_class]()


def _pipe(path, command, out):
    """Run `command` with file `path` on stdin into the open file `out`."""
    try:
        with open(path, "rb") as f:
            res = subprocess.run(command, shell=True, stdin=f, stdout=out,
                                 stderr=subprocess.PIPE)
    except OSError as e:
        raise FluidityError(f"dataset: cannot read {path}: {e.strerror or e}") from None
    if res.returncode != 0:
        err = res.stderr.decode("utf-8", "replace").strip()
        raise FluidityError(f"dataset: pipe command {command!r} failed on {path} (exit "
                            f"status {res.returncode}){': ' + err if err else ''}")


class DatasetBase:
    def __init__(self):
        self.proto_desc = data_feed_pb2.DataFeedDesc(name="MultiSlotDataFeed", batch_size=32)
        self.proto_desc.pipe_command = "cat"
        self.thread_num = 1
        self.filelist = []
        self.use_vars = []
        self._tmp = None          # a TemporaryDirectory of materialized shards
        self._cleanup = None

    # -- configuration ----------------------------------------------------------------------
    def set_pipe_command(self, pipe_command):
        self.proto_desc.pipe_command = str(pipe_command)

    def set_batch_size(self, batch_size):
        if int(batch_size) < 1:
            raise FluidityError(f"set_batch_size: must be >= 1, got {batch_size}")
        self.proto_desc.batch_size = int(batch_size)

    def set_thread(self, thread_num):
        if int(thread_num) < 1:
            raise FluidityError(f"set_thread: must be >= 1, got {thread_num}")
        self.thread_num = int(thread_num)
        self.proto_desc.thread_num = int(thread_num)

    def set_filelist(self, filelist):
        files = [os.fspath(f) for f in filelist]
        missing = [f for f in files if not os.path.isfile(f)]
        if missing:
            raise FluidityError(f"set_filelist: no such file(s): {missing[:5]}")
        self.filelist = files

    def set_use_var(self, var_list):
        """The data variables, one per slot of the files in order: an int64 variable is a
        "uint64" slot, a float32 one a "float" slot; lod_level 0 makes it dense (shape from
        the variable)."""
        del self.proto_desc.multi_slot_desc.slots[:]
        for var in var_list:
            kind = _SLOT_TYPE.get(var.dtype)
            if kind is None:
                raise FluidityError(f"set_use_var: variable '{var.name}' is "
                                    f"{dtypes.name(var.dtype)}; a slot is int64 or float32")
            slot = self.proto_desc.multi_slot_desc.slots.add(name=var.name, type=kind,
                                                             is_used=True)
            if var.lod_level == 0:
                slot.is_dense = True
                slot.shape.extend(int(d) for d in var.shape)
        self.use_vars = list(var_list)

    def set_hdfs_config(self, fs_name, fs_ugi):
        raise FluidityError("dataset: HDFS is not supported; copy the files locally")

    def desc(self):
        """The DataFeedDesc in protobuf text format."""
        return text_format.MessageToString(self.proto_desc)

    def data_feed_desc(self):
        if not self.proto_desc.multi_slot_desc.slots:
            raise FluidityError("dataset: no slots: call set_use_var(data variables) first")
        return DataFeedDesc.from_text(self.desc(), "<dataset>")

    # -- materialized files ---------------------------------------------------------------
    def _tmpdir(self):
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="fluidity-dataset-")
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._tmp, True)
        return self._tmp

    def _drop_tmp(self):
        if self._cleanup is not None:
            self._cleanup()
        self._tmp = self._cleanup = None

    def _piped_files(self):
        """The file list, each piped through the pipe command into a temporary file (the
        files themselves under "cat")."""
        cmd = self.proto_desc.pipe_command.strip()
        if cmd in ("", "cat"):
            return list(self.filelist)
        out = []
        d = self._tmpdir()
        for k, path in enumerate(self.filelist):
            dst = os.path.join(d, f"piped-{k:05d}.txt")
            with open(dst, "wb") as f:
                _pipe(path, cmd, f)
            out.append(dst)
        return out

    def _check_ready(self):
        if not self.filelist:
            raise FluidityError("dataset: the file list is empty (set_filelist)")
        self.data_feed_desc()

    # -- running --------------------------------------------------------------------------
    def worker_files(self, thread_num):
        """The files the workers of a run read (see the module's docstring)."""
        raise NotImplementedError

    def run_workers(self, program=None, scope=None, thread=0, debug=False,
                    fetch_list=None, fetch_info=None, print_period=100, infer=False,
                    fetch_handler=None):
        """`exe.train_from_dataset` / `infer_from_dataset`: run `program` over this dataset
        with Hogwild workers (AsyncExecutor.run); infer runs the program's inference copy
        (no backward or optimizer ops: the parameters stay as they are). Returns the
        AsyncExecutor's result (the fetched means over the run, and the run's record).
        `fetch_handler` is called on its period and at the end (executor/fetch_handler.py)."""
        from .executor.async_executor import AsyncExecutor
        from .framework import Program, default_main_program
        self._check_ready()
        program = default_main_program() if program is None else program
        if hasattr(program, "program_for_executor"):       # a CompiledProgram
            program = program.program_for_executor()
        if not isinstance(program, Program):
            raise FluidityError(f"train_from_dataset needs a Program, got "
                                f"{type(program).__name__}")
        if infer:
            program = program.clone(for_test=True)
        threads = min(self.thread_num, int(thread)) if thread and int(thread) > 0 \
            else self.thread_num
        files = self.worker_files(threads)
        fetch_list = list(fetch_list or [])
        monitor = None
        if fetch_handler is not None:
            from .core.scope import global_scope
            from .executor.fetch_handler import FetchHandlerMonitor
            monitor = FetchHandlerMonitor(fetch_handler, program,
                                          scope if scope is not None else global_scope())
            monitor.start()
        try:
            result = AsyncExecutor().run(
                program, self.data_feed_desc(), files, threads, fetch=fetch_list,
                debug=debug, scope=scope, fetch_info=fetch_info,
                report_every=max(1, int(print_period)) if fetch_list else None,
                callback=monitor.report if monitor else None)
        except BaseException:
            if monitor:
                monitor.stop(final=False)
            raise
        if monitor:
            monitor.stop()
        self._after_run()
        return result

    def _after_run(self):
        pass

    def batches(self, drop_last=True):
        """{slot name: LoDTensor} batches of the dataset in order (DataLoader.from_dataset)."""
        self._check_ready()
        files = self.worker_files(1)
        bs = self.proto_desc.batch_size
        try:
            for batch in MultiSlotReader(self.data_feed_desc(), files):
                if drop_last and len(batch) and batch_examples(batch) < bs:
                    return
                yield batch
        finally:
            self._after_run()


class QueueDataset(DatasetBase):
    """Streams its files (each through the pipe command); cannot be shuffled."""

    def local_shuffle(self):
        raise FluidityError("QueueDataset does not support local_shuffle: use InMemoryDataset")

    def global_shuffle(self, fleet=None):
        raise FluidityError("QueueDataset does not support global_shuffle: use "
                            "InMemoryDataset")

    def worker_files(self, thread_num):
        return self._piped_files()

    def _after_run(self):
        self._drop_tmp()       # piped copies are made per run


class InMemoryDataset(DatasetBase):
    """Loads every instance of its files (piped) into memory: `load_into_memory()`, then
    `local_shuffle()` / `global_shuffle()` (local: one machine), `release_memory()`.
    Id 0 in a sparse slot is kept (Paddle drops it silently)."""

    def __init__(self):
        super().__init__()
        self.proto_desc.name = "MultiSlotInMemoryDataFeed"
        self._lines = None
        self._version = 0
        self._shards = None       # (version, thread_num, files)

    def load_into_memory(self):
        self._check_ready()
        lines = []
        cmd = self.proto_desc.pipe_command.strip()
        for path in self.filelist:
            if cmd in ("", "cat"):
                with open(path, "rb") as f:
                    data = f.read()
            else:
                with tempfile.TemporaryFile() as f:
                    _pipe(path, cmd, f)
                    f.seek(0)
                    data = f.read()
            lines.extend(ln for ln in data.split(b"\n") if ln.strip())
        self._lines = lines
        self._changed()
        logger.info("InMemoryDataset: %d instances loaded from %d file(s)", len(lines),
                    len(self.filelist))

    def _changed(self):
        self._version += 1
        self._shards = None
        self._drop_tmp()

    def _need_memory(self, what):
        if self._lines is None:
            raise FluidityError(f"InMemoryDataset.{what}: call load_into_memory() first")

    def local_shuffle(self):
        self._need_memory("local_shuffle")
        random.shuffle(self._lines)
        self._changed()

    def global_shuffle(self, fleet=None):
        """Shuffles the instances of this machine (there is no other)."""
        self.local_shuffle()

    def release_memory(self):
        self._lines = None
        self._changed()

    def get_memory_data_size(self, fleet=None):
        self._need_memory("get_memory_data_size")
        return len(self._lines)

    def get_shuffle_data_size(self, fleet=None):
        return self.get_memory_data_size(fleet)

    def worker_files(self, thread_num):
        self._need_memory("train_from_dataset")
        if self._shards is not None and self._shards[:2] == (self._version, thread_num):
            return self._shards[2]
        d = self._tmpdir()
        n = max(1, min(thread_num, len(self._lines)))
        files = []
        for k in range(n):
            path = os.path.join(d, f"memory-{self._version}-{k:03d}.txt")
            with open(path, "wb") as f:
                part = self._lines[len(self._lines) * k // n:len(self._lines) * (k + 1) // n]
                f.write(b"\n".join(part) + b"\n")
            files.append(path)
        self._shards = (self._version, thread_num, files)
        return files


class DatasetLoader:
    """`DataLoader.from_dataset(dataset, places, drop_last)`: iterate the dataset's batches
    as feeds ([{name: LoDTensor}], one place)."""

    def __init__(self, dataset, drop_last=True):
        if not isinstance(dataset, DatasetBase):
            raise FluidityError(f"DataLoader.from_dataset needs a Dataset, got "
                                f"{type(dataset).__name__}")
        self.dataset = dataset
        self.drop_last = bool(drop_last)

    def __call__(self):
        return iter(self)

    def __iter__(self):
        for batch in self.dataset.batches(self.drop_last):
            yield [batch]

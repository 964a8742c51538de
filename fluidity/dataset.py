"""Datasets for `Executor.train_from_dataset` (Fluid 1.4-1.8): MultiSlot data read by Hogwild
workers.

    dataset = fluid.InMemoryDataset()        # or DatasetFactory().create_dataset(name)
    dataset.set_use_var([dense, ids, label])     # data variables = the lines' slots, in order
    dataset.set_batch_size(32); dataset.set_thread(2)
    dataset.set_filelist(files); dataset.set_pipe_command("python my_generator.py")
    dataset.load_into_memory(); dataset.local_shuffle()
    exe.train_from_dataset(main, dataset, fetch_list=[loss])

Kinds: `QueueDataset` (and `FileInstantDataset`, the same here) streams its files;
`InMemoryDataset` loads every instance (line) into memory first, so it can be shuffled
(`local_shuffle`, `global_shuffle`), merged by instance id (`set_merge_by_lineid`) and
trained on for several passes.

Each file goes through `pipe_command` (a shell command reading the file on stdin and
writing MultiSlot lines on stdout, "cat" by default; a data generator script,
`fluid.incubate.data_generator`, is the usual one). Nothing is written to disk: a
QueueDataset's workers read the command's output as it comes (datafeed/sources.py), an
InMemoryDataset keeps its records in memory (datafeed/memory.py) and hands each worker a
share of them. A command that fails stops the run with its exit status and stderr; a bad
line names the file and line it came from, for records in memory too.

The workers are the AsyncExecutor's (executor/async_executor.py): threads running the
compiled training step when the whole program compiles, forked processes otherwise. A slot
that no op of the program reads (nor fetch_list) is not fed (its counts are still checked);
a program with no ops runs nothing. An empty file list runs nothing, as in Paddle.

Differences from Paddle: id 0 in a sparse slot is kept (Paddle's InMemoryDataset drops it
silently, which changes sequence lengths); there is no HDFS client (`set_download_cmd`
fetches remote paths); `global_shuffle(fleet)` deals the records over the trainers of a
collective fleet (incubate/fleet/collective) and shuffles locally otherwise.
"""
import logging
import os

from google.protobuf import text_format

from .core import dtypes
from .core.dtypes import VarType
from .datafeed import data_feed_pb2
from .datafeed.data_feed_desc import DataFeedDesc
from .datafeed.dataset_core import Dataset as CoreDataset, is_remote, sources
from .datafeed.multislot import MultiSlotReader
from .errors import FluidityError
from .executor.async_executor import batch_examples
from .reader.loader_base import DataLoaderBase

logger = logging.getLogger("fluidity")

__all__ = ["DatasetFactory", "DatasetBase", "QueueDataset", "InMemoryDataset",
           "FileInstantDataset", "BoxPSDataset"]

_SLOT_TYPE = {VarType.INT64: "uint64", VarType.FP32: "float"}  # as Paddle: no other dtypes


class DatasetError(FluidityError, ValueError):
    """A dataset asked for something it cannot do, or configured with a bad value."""


class DatasetUnsupported(FluidityError, NotImplementedError):
    """What a kind of dataset cannot do (a QueueDataset shuffled)."""


class DatasetFactory:
    """`DatasetFactory().create_dataset("QueueDataset" | "InMemoryDataset" |
    "FileInstantDataset")` (default QueueDataset)."""

    def create_dataset(self, datafeed_class="QueueDataset"):
        kinds = {"QueueDataset": QueueDataset, "InMemoryDataset": InMemoryDataset,
                 "FileInstantDataset": FileInstantDataset, "BoxPSDataset": BoxPSDataset}
        if datafeed_class not in kinds:
            raise DatasetError(f"datafeed class {datafeed_class!r} does not exist (unknown "
                               f"dataset; one of {sorted(kinds)})")
        return kinds[datafeed_class]()


def _positive_int(what, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        try:
            ok = not isinstance(value, bool) and int(value) == value and int(value) >= 1
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise DatasetError(f"{what}: must be a positive int, got {value!r}")
    return int(value)


class DatasetBase:
    def __init__(self):
        self.proto_desc = data_feed_pb2.DataFeedDesc(name="MultiSlotDataFeed", batch_size=32)
        self.proto_desc.pipe_command = "cat"
        self.dataset = CoreDataset("MultiSlotDataset")
        self.thread_num = 1
        self.filelist = []
        self.use_vars = []
        self.fea_eval = False

    # -- configuration ----------------------------------------------------------------------
    def set_pipe_command(self, pipe_command):
        """A shell command each file goes through (stdin: the file; stdout: MultiSlot
        lines), e.g. "python my_data_generator.py"."""
        self.proto_desc.pipe_command = str(pipe_command)

    def set_rank_offset(self, rank_offset):
        self.proto_desc.rank_offset = str(rank_offset)

    def set_batch_size(self, batch_size):
        self.proto_desc.batch_size = _positive_int("set_batch_size", batch_size)

    def set_pv_batch_size(self, pv_batch_size):
        self.proto_desc.pv_batch_size = _positive_int("set_pv_batch_size", pv_batch_size)

    def set_thread(self, thread_num):
        """The number of readers (and of Hogwild workers in train_from_dataset)."""
        self.thread_num = _positive_int("set_thread", thread_num)
        self.dataset.set_thread_num(self.thread_num)
        self.proto_desc.thread_num = self.thread_num

    def set_filelist(self, filelist):
        if isinstance(filelist, (str, bytes)) or not hasattr(filelist, "__iter__"):
            raise DatasetError(f"set_filelist: needs a list of file paths, got {filelist!r}")
        files = [os.fspath(f) for f in filelist]
        missing = [f for f in files if not is_remote(f) and not os.path.isfile(f)]
        if missing:
            raise DatasetError(f"set_filelist: no such file(s): {missing[:5]}")
        self.filelist = files
        self.dataset.set_filelist(files)

    def set_input_type(self, input_type):
        self.proto_desc.input_type = int(input_type)

    def set_use_var(self, var_list):
        """The data variables, one per slot of the lines in order: an int64 variable is a
        "uint64" slot, a float32 one a "float" slot; lod_level 0 makes it dense (shape from
        the variable)."""
        del self.proto_desc.multi_slot_desc.slots[:]
        for var in var_list:
            kind = _SLOT_TYPE.get(var.dtype)
            if kind is None:
                raise DatasetError(f"set_use_var: variable '{var.name}' is "
                                   f"{dtypes.name(var.dtype)}; Currently, fluid.dataset only "
                                   f"supports dtype=float32 and dtype=int64")
            slot = self.proto_desc.multi_slot_desc.slots.add(name=var.name, type=kind,
                                                             is_used=True)
            if var.lod_level == 0:
                slot.is_dense = True
                slot.shape.extend(int(d) for d in var.shape)
        self.use_vars = list(var_list)

    def set_hdfs_config(self, fs_name, fs_ugi):
        raise DatasetError("dataset: there is no HDFS client here; give remote files a "
                           "set_download_cmd(command that prints the file named as its last "
                           "argument), or copy the files locally")

    def set_download_cmd(self, download_cmd):
        """The shell command that fetches a remote (hdfs:/afs:) file list entry: it is run
        as `download_cmd "path"` and its output goes through the pipe command."""
        self.dataset.set_download_cmd(download_cmd)

    def set_fea_eval(self, record_candidate_size, fea_eval=True):
        """Feature evaluation: allow slots_shuffle over a pool of `record_candidate_size`
        records."""
        if fea_eval:
            self.dataset.set_fea_eval(fea_eval, record_candidate_size)
        self.fea_eval = bool(fea_eval)

    def slots_shuffle(self, slots):
        """Replace the values of `slots` in every record by those of a random record (to
        measure what those slots are worth, e.g. the AUC lost); needs set_fea_eval."""
        if self.fea_eval:
            self.dataset.slots_shuffle(set(slots))
        else:
            logger.warning("slots_shuffle: call set_fea_eval(candidate_size, True) first; "
                           "nothing shuffled")

    def desc(self):
        """The DataFeedDesc in protobuf text format."""
        return text_format.MessageToString(self.proto_desc)

    def data_feed_desc(self):
        if not self.proto_desc.multi_slot_desc.slots:
            raise DatasetError("dataset: no slots: call set_use_var(data variables) first")
        return DataFeedDesc.from_text(self.desc(), "<dataset>")

    def _prepare_to_run(self):
        self.dataset.set_data_feed_desc(self.desc())

    def _finish_to_run(self):
        pass

    # -- running --------------------------------------------------------------------------
    def worker_sources(self, thread_num):
        """What the workers of a run read: paths or sources (datafeed/sources.py)."""
        self._prepare_to_run()
        return sources(self.filelist, self.proto_desc.pipe_command,
                       self.dataset.get_download_cmd())

    def run_workers(self, program=None, scope=None, thread=0, debug=False,
                    fetch_list=None, fetch_info=None, print_period=100, infer=False,
                    fetch_handler=None, tensorboard_dir=None):
        """`exe.train_from_dataset` / `infer_from_dataset`: run `program` over this dataset
        with Hogwild workers (AsyncExecutor.run); infer runs the program's inference copy
        (no backward or optimizer ops: the parameters stay as they are). Returns the
        AsyncExecutor's result (the fetched means over the run, and the run's record), an
        empty one when there is nothing to read or to run. `fetch_handler` is called on its
        period and at the end (executor/fetch_handler.py). The fetched means go to stdout
        every `print_period` batches as Fluid prints them, and to `tensorboard_dir` as
        TensorBoard scalars when given (executor/progress.py)."""
        from .executor.async_executor import AsyncExecutor, AsyncRunResult
        from .framework import Program, default_main_program
        program = default_main_program() if program is None else program
        if hasattr(program, "program_for_executor"):       # a CompiledProgram
            program = program.program_for_executor()
        if not isinstance(program, Program):
            raise FluidityError(f"train_from_dataset needs a Program, got "
                                f"{type(program).__name__}")
        if infer:
            program = program.clone(for_test=True)
        fetch_list = list(fetch_list or [])
        desc = self._run_desc(program, fetch_list)
        threads = min(self.thread_num, int(thread)) if thread and int(thread) > 0 \
            else self.thread_num
        files = self.worker_sources(threads) if desc is not None else []
        monitor = None
        if fetch_handler is not None:
            from .core.scope import global_scope
            from .executor.fetch_handler import FetchHandlerMonitor
            monitor = FetchHandlerMonitor(fetch_handler, program,
                                          scope if scope is not None else global_scope())
            monitor.start()
        try:
            if not files:
                logger.info("train_from_dataset: %s; nothing to run", "no data (the file list "
                            "or the memory is empty)" if desc is not None else
                            "the program has no ops that read the data")
                result = AsyncRunResult([0.0] * len(fetch_list))
                result.history, result.examples, result.seconds = [], 0, 0.0
                result.examples_per_sec, result.skipped_lines, result.workers = 0.0, 0, []
                result.fetch_names = [getattr(f, "name", f) for f in fetch_list]
            else:
                result = AsyncExecutor().run(
                    program, desc, files, threads, fetch=fetch_list,
                    debug=debug, scope=scope, fetch_info=fetch_info,
                    print_period=max(1, int(print_period)) if fetch_list else None,
                    tensorboard_dir=tensorboard_dir,
                    callback=monitor.report if monitor else None)
        except BaseException:
            if monitor:
                monitor.stop(final=False)
            raise
        if monitor:
            monitor.stop()
        return result

    def _run_desc(self, program, fetch_list):
        """The DataFeedDesc of a run of `program`: the slots no op reads (and not fetched)
        are marked unused, so they are not fed. None when the program reads no slot (it has
        no ops on the data: nothing to run)."""
        self.data_feed_desc()                     # checked: slots are set
        read = {n for b in program.blocks for op in b.ops for n in op.input_arg_names}
        read |= {getattr(f, "name", f) for f in fetch_list}
        msg = data_feed_pb2.DataFeedDesc()
        msg.CopyFrom(self.proto_desc)
        keep = False
        for slot in msg.multi_slot_desc.slots:
            if slot.is_used and slot.name not in read:
                slot.is_used = False
            keep |= slot.is_used
        if not keep:
            return None
        return DataFeedDesc.from_text(text_format.MessageToString(msg), "<dataset>")

    def reader_sources(self):
        """The sources (or paths) a DataLoader reads with one reader per place."""
        return self.worker_sources(self.thread_num)

    def batches(self, drop_last=True, files=None):
        """{slot name: LoDTensor} batches of the dataset (or of `files`, some of its
        sources) in order (DataLoader.from_dataset)."""
        desc = self.data_feed_desc()
        files = self.reader_sources() if files is None else files
        if not files:
            return
        bs = self.proto_desc.batch_size
        for batch in MultiSlotReader(desc, files):
            if drop_last and len(batch) and batch_examples(batch) < bs:
                return
            yield batch

    def _dynamic_adjust_before_train(self, thread_num):
        pass

    def _dynamic_adjust_after_train(self):
        pass


class QueueDataset(DatasetBase):
    """Streams its files (each through the pipe command); cannot be shuffled."""

    def __init__(self):
        super().__init__()
        self.proto_desc.name = "MultiSlotDataFeed"

    def local_shuffle(self):
        raise DatasetUnsupported("QueueDataset does not support local shuffle, please use "
                                  "InMemoryDataset for local_shuffle")

    def global_shuffle(self, fleet=None):
        raise DatasetUnsupported("QueueDataset does not support global shuffle, please use "
                                  "InMemoryDataset for global_shuffle")


class FileInstantDataset(DatasetBase):
    """Paddle's instant (file-at-a-time) reader: here the same streaming as QueueDataset."""

    def __init__(self):
        super().__init__()
        self.proto_desc.name = "MultiSlotFileInstantDataFeed"

    def local_shuffle(self):
        raise DatasetUnsupported("FileInstantDataset does not support local shuffle, please "
                                  "use InMemoryDataset for local_shuffle")

    def global_shuffle(self, fleet=None):
        raise DatasetUnsupported("FileInstantDataset does not support global shuffle, "
                                  "please use InMemoryDataset for global_shuffle")


class InMemoryDataset(DatasetBase):
    """Loads every instance of its files (piped) into memory: `load_into_memory()` (or
    `preload_into_memory()` + `wait_preload_done()`), then `local_shuffle()` /
    `global_shuffle(fleet)`, train as often as wanted, `release_memory()`.
    Id 0 in a sparse slot is kept (Paddle drops it silently)."""

    def __init__(self):
        super().__init__()
        self.proto_desc.name = "MultiSlotInMemoryDataFeed"
        self.fleet_send_batch_size = None
        self.is_user_set_queue_num = False
        self.queue_num = None
        self.parse_ins_id = False
        self.parse_content = False
        self.parse_logkey = False
        self.merge_by_sid = True
        self.enable_pv_merge = False
        self.merge_by_lineid = False
        self.fleet_send_sleep_seconds = None
        self._loaded = False

    def set_feed_type(self, data_feed_type):
        self.proto_desc.name = str(data_feed_type)

    def set_queue_num(self, queue_num):
        self.is_user_set_queue_num = True
        self.queue_num = _positive_int("set_queue_num", queue_num)

    def set_parse_ins_id(self, parse_ins_id):
        """Each line starts with `1 <instance id>` (before the slots): kept per record, for
        set_merge_by_lineid."""
        self.parse_ins_id = bool(parse_ins_id)

    def set_parse_content(self, parse_content):
        """Each line starts with `1 <content>` (after the instance id, if any)."""
        self.parse_content = bool(parse_content)

    def set_parse_logkey(self, parse_logkey):
        self.parse_logkey = bool(parse_logkey)

    def set_merge_by_sid(self, merge_by_sid):
        self.merge_by_sid = bool(merge_by_sid)

    def set_enable_pv_merge(self, enable_pv_merge):
        self.enable_pv_merge = bool(enable_pv_merge)

    def set_fleet_send_batch_size(self, fleet_send_batch_size=1024):
        self.fleet_send_batch_size = _positive_int("set_fleet_send_batch_size",
                                                   fleet_send_batch_size)

    def set_fleet_send_sleep_seconds(self, fleet_send_sleep_seconds=0):
        self.fleet_send_sleep_seconds = int(fleet_send_sleep_seconds)

    def set_merge_by_lineid(self, merge_size=2):
        """After a global shuffle (or `dataset.dataset.merge_by_lineid()`), the records that
        share an instance id become one; groups of another size than `merge_size` are
        dropped. Turns on parse_ins_id."""
        self.dataset.set_merge_by_lineid(merge_size)
        self.merge_by_lineid = True
        self.parse_ins_id = True

    def set_generate_unique_feasigns(self, generate_uni_feasigns, shard_num):
        self.dataset.set_generate_unique_feasigns(generate_uni_feasigns)
        self.gen_uni_feasigns = bool(generate_uni_feasigns)
        self.local_shard_num = int(shard_num)

    def generate_local_tables_unlock(self, table_id, fea_dim, read_thread_num,
                                     consume_thread_num, shard_num):
        self.dataset.generate_local_tables_unlock(table_id, fea_dim, read_thread_num,
                                                  consume_thread_num, shard_num)

    def _prepare_to_run(self):
        d = self.dataset
        d.set_thread_num(self.thread_num)
        d.set_queue_num(self.queue_num if self.queue_num is not None else self.thread_num)
        d.set_parse_ins_id(self.parse_ins_id)
        d.set_parse_content(self.parse_content)
        d.set_parse_logkey(self.parse_logkey)
        d.set_merge_by_sid(self.merge_by_sid)
        d.set_enable_pv_merge(self.enable_pv_merge)
        d.set_data_feed_desc(self.desc())

    def load_into_memory(self):
        self.data_feed_desc()                     # slots set: the records can be checked
        self._prepare_to_run()
        self.dataset.load_into_memory()
        self._loaded = True

    def preload_into_memory(self, thread_num=None):
        self.data_feed_desc()
        self._prepare_to_run()
        self.dataset.set_preload_thread_num(thread_num if thread_num is not None
                                            else self.thread_num)
        self.dataset.preload_into_memory()
        self._loaded = True

    def wait_preload_done(self):
        self.dataset.wait_preload_done()

    def _need_memory(self, what):
        if not self._loaded:
            raise DatasetError(f"InMemoryDataset.{what}: call load_into_memory() first")

    def local_shuffle(self):
        self._need_memory("local_shuffle")
        self.dataset.local_shuffle()

    def global_shuffle(self, fleet=None, thread_num=12):
        """Shuffle over the trainers of `fleet`: each record goes to a trainer drawn at
        random (the collective fleet exchanges them over its collective library; a fleet
        without one, or none, shuffles this trainer's records); then merge_by_lineid if
        set."""
        self._need_memory("global_shuffle")
        trainers, exchange = 1, None
        if fleet is not None:
            trainers = fleet.worker_num()
            exchange = getattr(fleet, "exchange_records", None)
            if trainers > 1 and exchange is None:
                logger.warning("global_shuffle: this fleet cannot send records to other "
                               "trainers (only the collective fleet can); shuffling the %d "
                               "instance(s) of this trainer", self.dataset.get_memory_data_size())
            fleet_barrier(fleet)
        self.dataset.set_trainer_num(trainers)
        self.dataset.set_fleet_send_batch_size(self.fleet_send_batch_size or 1024)
        self.dataset.set_fleet_send_sleep_seconds(self.fleet_send_sleep_seconds or 0)
        self.dataset.global_shuffle(thread_num, exchange)
        if fleet is not None:
            fleet_barrier(fleet)

    def release_memory(self):
        self.dataset.release_memory()
        self._loaded = False

    def get_pv_data_size(self):
        return 0

    def get_memory_data_size(self, fleet=None):
        """Instances in memory (summed over the trainers with a fleet)."""
        self._need_memory("get_memory_data_size")
        return _summed(fleet, self.dataset.get_memory_data_size())

    def get_shuffle_data_size(self, fleet=None):
        """Instances received by the last shuffle (summed over the trainers with a fleet)."""
        self._need_memory("get_shuffle_data_size")
        return _summed(fleet, self.dataset.get_shuffle_data_size())

    def worker_sources(self, thread_num):
        self._need_memory("train_from_dataset")
        self.dataset.wait_preload_done()
        return self.dataset.memory.sources(thread_num)

    def reader_sources(self):
        return self.worker_sources(self.thread_num)


class BoxPSDataset(InMemoryDataset):
    def __init__(self):
        raise NotImplementedError("BoxPSDataset needs Baidu's BoxPS (a GPU parameter "
                                  "server), which is not part of Fluidity; use "
                                  "InMemoryDataset")


def fleet_barrier(fleet):
    rm = getattr(fleet, "_role_maker", None)
    barrier = getattr(rm, "barrier_worker", None) if rm is not None else None
    if barrier is not None:
        barrier()


def _summed(fleet, local):
    """`local` summed over the trainers of `fleet` (its role maker's all_reduce_worker)."""
    import numpy as np
    if fleet is None:
        return int(local)
    out = np.zeros(1, np.int64)
    fleet._role_maker.all_reduce_worker(np.array([local], np.int64), out)
    return int(out[0])


class DatasetLoader(DataLoaderBase):
    """`DataLoader.from_dataset(dataset, places, drop_last)`: one reader per place over a
    share of the dataset's files (or records); each step gives one batch per place
    ([{name: LoDTensor}] in place order) and the iteration ends when a step cannot be
    filled (as Paddle's IterableDatasetWrapper). With drop_last, a short batch counts as
    none."""

    def __init__(self, dataset, places=None, drop_last=True):
        super().__init__()
        if not isinstance(dataset, DatasetBase):
            raise DatasetError(f"DataLoader.from_dataset needs a Dataset, got "
                               f"{type(dataset).__name__}")
        from .core.place import CPUPlace
        places = [CPUPlace()] if places is None else (
            list(places) if isinstance(places, (list, tuple)) else [places])
        if not places:
            raise DatasetError("DataLoader.from_dataset: places is empty")
        if isinstance(dataset, QueueDataset) and len(dataset.filelist) < len(places) \
                and dataset.filelist:
            raise DatasetError(f"Filelist number of dataset {len(dataset.filelist)} must be "
                               f"not less than place number {len(places)}")
        if dataset.thread_num != len(places):
            logger.info("DataLoader.from_dataset: %d reader(s), one per place (the dataset's "
                        "thread_num %d is ignored)", len(places), dataset.thread_num)
        self.dataset, self.places = dataset, places
        self._places = places
        self.drop_last = bool(drop_last)

    def __call__(self):
        return iter(self)

    def __iter__(self):
        files = self.dataset.worker_sources(len(self.places))
        n = len(self.places)
        shares = [files[k::n] for k in range(n)]      # files handed out round-robin
        readers = [iter(self.dataset.batches(self.drop_last, share)) if share else iter(())
                   for share in shares]
        bs = self.dataset.proto_desc.batch_size
        live = [True] * n
        while True:
            step = []
            for k, r in enumerate(readers):
                if len(step) == n:
                    break
                if not live[k]:
                    continue
                batch = next(r, None)
                if batch is None or (self.drop_last and batch_examples(batch) < bs):
                    live[k] = False
                    continue
                step.append(batch)       # host tensors: every place here is a CPU
            if len(step) < n:
                return
            yield step

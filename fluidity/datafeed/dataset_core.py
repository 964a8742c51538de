"""`fluid.core.Dataset`: the object behind a Python Dataset (Paddle's C++
`MultiSlotDataset`), its configuration and, for an InMemoryDataset, its records.

    ds = fluid.core.Dataset("MultiSlotDataset")
    ds.set_filelist(["a.txt"]); ds.set_thread_num(2); ds.set_data_feed_desc(desc_text)
    ds.load_into_memory(); ds.local_shuffle(); ds.get_memory_data_size()

Where the data of a file list entry comes from (`sources`): a local file, read directly
when the pipe command is "cat" and streamed through the pipe command otherwise; a remote
path (`hdfs:` / `afs:`) through the download command (`set_download_cmd`: a shell command
that prints the file given as its last argument) and then the pipe command. There is no
HDFS client here: without a download command a remote path is an error.
"""
import logging
import shlex

from google.protobuf import text_format

from . import data_feed_pb2
from .errors import DataError
from .memory import MemoryStore, Preload, SlotLayout
from .sources import CommandSource, FileSource, PipeSource

logger = logging.getLogger("fluidity")

__all__ = ["Dataset", "sources", "is_remote"]

REMOTE_SCHEMES = ("hdfs:", "afs:")


def is_remote(path):
    return str(path).startswith(REMOTE_SCHEMES)


def sources(filelist, pipe_command="cat", download_cmd=""):
    """The sources (sources.py) of a file list (see the module's docstring)."""
    pipe = (pipe_command or "").strip()
    piped = pipe not in ("", "cat")
    out = []
    for path in filelist:
        if is_remote(path):
            if not download_cmd:
                raise DataError(f"dataset: {path} is a remote path and there is no HDFS client "
                                f"here; set_download_cmd(a command printing the file) or "
                                f"copy the files locally")
            cmd = f"{download_cmd} {shlex.quote(str(path))}" + (f" | {pipe}" if piped else "")
            out.append(CommandSource(cmd, f"{path} | {cmd}"))
        elif piped:
            out.append(PipeSource(path, pipe))
        else:
            out.append(FileSource(path))
    return out


class Dataset:
    """Paddle's `core.Dataset(name)` (name: "MultiSlotDataset", the only kind)."""

    def __init__(self, name="MultiSlotDataset"):
        if name != "MultiSlotDataset":
            raise ValueError(f"core.Dataset: unknown dataset kind {name!r} (only "
                             f"'MultiSlotDataset')")
        self.name = name
        self._thread_num = 1
        self._filelist = []
        self._trainer_num = 1
        self._hdfs = ("", "")
        self._download_cmd = ""
        self._desc = data_feed_pb2.DataFeedDesc()
        self._queue_num = None
        self._parse_ins_id = self._parse_content = self._parse_logkey = False
        self._merge_by_sid, self._enable_pv_merge = True, False
        self._merge_size = 0          # set_merge_by_lineid
        self._merge_by_lineid = False
        self._fea_eval, self._candidates = False, 0
        self._unique_feasigns = False
        self._fleet_send_batch_size, self._fleet_send_sleep_seconds = 1024, 0
        self._preload_threads = None
        self._preload = None
        self.memory = MemoryStore()
        self._shuffled = 0
        self.local_tables = {}

    # -- configuration (Paddle's setters and getters) -----------------------------------------
    def set_thread_num(self, thread_num):
        if int(thread_num) < 1:
            raise ValueError(f"set_thread_num: must be >= 1, got {thread_num}")
        self._thread_num = int(thread_num)

    def get_thread_num(self):
        return self._thread_num

    def set_filelist(self, filelist):
        self._filelist = [str(f) for f in filelist]

    def get_filelist(self):
        return list(self._filelist)

    def set_trainer_num(self, trainer_num):
        self._trainer_num = int(trainer_num)

    def get_trainer_num(self):
        return self._trainer_num

    def set_hdfs_config(self, fs_name, fs_ugi):
        self._hdfs = (str(fs_name), str(fs_ugi))

    def get_hdfs_config(self):
        return self._hdfs

    def set_download_cmd(self, download_cmd):
        self._download_cmd = str(download_cmd)

    def get_download_cmd(self):
        return self._download_cmd

    def set_data_feed_desc(self, desc):
        msg = data_feed_pb2.DataFeedDesc()
        text_format.Parse(desc, msg) if isinstance(desc, str) else msg.CopyFrom(desc)
        self._desc = msg

    def get_data_feed_desc(self):
        return text_format.MessageToString(self._desc)

    def set_queue_num(self, queue_num):
        self._queue_num = int(queue_num)

    def set_parse_ins_id(self, parse_ins_id):
        self._parse_ins_id = bool(parse_ins_id)

    def set_parse_content(self, parse_content):
        self._parse_content = bool(parse_content)

    def set_parse_logkey(self, parse_logkey):
        if parse_logkey:
            raise NotImplementedError("set_parse_logkey(True): log keys (PaddleBox) are not "
                                      "parsed here")
        self._parse_logkey = False

    def set_merge_by_sid(self, merge_by_sid):
        self._merge_by_sid = bool(merge_by_sid)

    def set_enable_pv_merge(self, enable_pv_merge):
        if enable_pv_merge:
            raise NotImplementedError("set_enable_pv_merge(True): page-view merging (PaddleBox) "
                                      "is not built")

    def set_merge_by_lineid(self, merge_size=2):
        self._merge_by_lineid, self._merge_size = True, int(merge_size)
        self._parse_ins_id = True

    def set_fea_eval(self, fea_eval, record_candidate_size):
        self._fea_eval, self._candidates = bool(fea_eval), int(record_candidate_size)

    def set_generate_unique_feasigns(self, gen_uni_feasigns):
        self._unique_feasigns = bool(gen_uni_feasigns)

    def set_fleet_send_batch_size(self, size):
        self._fleet_send_batch_size = int(size)

    def set_fleet_send_sleep_seconds(self, seconds):
        self._fleet_send_sleep_seconds = int(seconds)

    def set_preload_thread_num(self, thread_num):
        self._preload_threads = int(thread_num)

    # -- the data -------------------------------------------------------------------------
    def layout(self):
        return SlotLayout(self._desc.multi_slot_desc.slots)

    def sources(self):
        return sources(self._filelist, self._desc.pipe_command or "cat", self._download_cmd)

    def load_into_memory(self, threads=None):
        """Read every instance of the file list (through the pipe command) into memory,
        with `threads` (the thread number) readers."""
        self._wait_preload()
        self.memory.load(self.sources(), threads or self._thread_num, self._parse_ins_id,
                         self._parse_content)
        self._shuffled = len(self.memory)
        logger.info("InMemoryDataset: %d instance(s) in memory from %d file(s)",
                    len(self.memory), len(self._filelist))

    def preload_into_memory(self):
        """load_into_memory in a background thread; wait_preload_done() waits for it."""
        self._wait_preload()
        threads = self._preload_threads or self._thread_num
        self._preload = Preload(lambda: self.load_into_memory(threads))

    def wait_preload_done(self):
        self._wait_preload()

    def _wait_preload(self):
        if self._preload is not None:
            pre, self._preload = self._preload, None
            pre.wait()

    def local_shuffle(self):
        self._wait_preload()
        self.memory.shuffle()

    def global_shuffle(self, thread_num=12, exchange=None):
        """Shuffle over the trainers: `exchange(buckets)` (the fleet's) sends bucket k of
        this trainer's records to trainer k and returns what this trainer received; without
        one (or with one trainer) the records are shuffled here."""
        self._wait_preload()
        n = max(1, self._trainer_num)
        if exchange is not None and n > 1:
            received = exchange(self.memory.partition(n))
            self.memory.replace(received)
            self._shuffled = len(self.memory)
        self.memory.shuffle()
        if self._merge_by_lineid:
            self.merge_by_lineid()

    def merge_by_lineid(self):
        if not self._merge_by_lineid:
            return 0
        self._wait_preload()
        dropped = self.memory.merge_by_ins_id(self.layout(), self._merge_size)
        if dropped:
            logger.warning("merge_by_lineid: %d instance(s) dropped (groups of an instance "
                           "id whose size is not %d, or with a sparse slot in two records)",
                           dropped, self._merge_size)
        return dropped

    def slots_shuffle(self, slots):
        if not self._fea_eval:
            logger.warning("slots_shuffle: fea_eval is off (set_fea_eval); nothing shuffled")
            return
        self._wait_preload()
        self.memory.shuffle_slots(self.layout(), sorted(slots), self._candidates)

    def generate_local_tables_unlock(self, table_id, fea_dim, read_thread_num,
                                     consume_thread_num, shard_num):
        """The distinct sparse ids of the records, in `shard_num` shards (id % shard_num):
        `local_tables[table_id]` = [(ids, values [n, fea_dim] float32 zeros)] per shard,
        the local tables a parameter-server pull would fill."""
        import numpy as np
        shards = self.memory.unique_feasigns(self.layout(), shard_num)
        self.local_tables[int(table_id)] = [
            (ids, np.zeros((len(ids), int(fea_dim)), np.float32)) for ids in shards]

    def release_memory(self):
        self._wait_preload()
        self.memory.release()
        self._shuffled = 0

    def get_memory_data_size(self):
        self._wait_preload()
        return len(self.memory)

    def get_shuffle_data_size(self):
        """Instances this trainer holds after the last shuffle (the loaded ones before)."""
        self._wait_preload()
        return self._shuffled

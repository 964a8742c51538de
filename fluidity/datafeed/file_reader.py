"""MultiSlotFilesReader: the reader `open_files` makes — instances of MultiSlot text files
read by N threads into one bounded queue.

Each reader tensor is one slot of the files, in order: an integer dtype is a "uint64" slot,
a float dtype a "float" slot; lod_level 0 makes it dense (its shape without the batch dim is
the slot's), lod_level 1 a sequence. Every batch the reader gives is one instance (one line);
`create_batch_reader` (fluid.layers.batch) joins them. Files are handed out one at a time
to the threads, so the instances of different files interleave.
"""
import threading
import weakref

import numpy as np

from google.protobuf import text_format

from ..core import dtypes
from ..core.reader import BlockingQueue, Reader, mark_passing, stop_threads
from ..core.tensor import LoDTensor
from .data_feed_pb2 import DataFeedDesc as DataFeedDescProto
from .data_feed_desc import DataFeedDesc
from .errors import DataError
from .multislot import MultiSlotReader


def desc_for(specs, batch_size=1):
    """A DataFeedDesc with one used slot `s<i>` per (shape, dtype code, lod_level)."""
    msg = DataFeedDescProto(name="MultiSlotDataFeed", batch_size=batch_size)
    for i, (shape, dtype, lod_level) in enumerate(specs):
        kind = "uint64" if np.dtype(dtypes.to_numpy(dtype)).kind in "iu" else "float"
        slot = msg.multi_slot_desc.slots.add(name=f"s{i}", type=kind, is_used=True,
                                              is_dense=not lod_level)
        if not lod_level:
            slot.shape.extend([-1] + [int(d) for d in list(shape)[1:]])
    return DataFeedDesc.from_text(text_format.MessageToString(msg), "<open_files>")


def _read_files(files, next_file, desc, casts, queue, done):
    """One reading thread: take files until none are left, push one instance per line."""
    lock, state = next_file
    try:
        while True:
            with lock:
                i = state[0]
                state[0] += 1
            if i >= len(files):
                break
            for batch in MultiSlotReader(desc, [files[i]], batch_size=1):
                tensors = [LoDTensor(np.asarray(t).astype(c, copy=False), t.lod())
                           for t, c in zip(batch.values(), casts)]
                if not queue.push(tensors):
                    return
    except BaseException as e:
        queue.close(mark_passing(e))
        return
    with lock:
        done[0] += 1
        last = done[0] == done[1]
    if last:
        queue.close()


class MultiSlotFilesReader(Reader):
    asynchronous = True

    def __init__(self, files, specs, thread_num=1, buffer_size=64):
        super().__init__()
        if not files:
            raise DataError("open_files: no files given")
        self.files = list(files)
        self.desc = desc_for(specs)
        self._casts = [dtypes.to_numpy(d) for _, d, _ in specs]
        self.thread_num = max(1, min(int(thread_num), len(self.files)))
        self._queue = BlockingQueue(max(1, int(buffer_size)))
        self._threads = []
        self._finalizer = weakref.finalize(self, stop_threads, self._queue, self._threads, False)

    def _start_threads(self):
        next_file = (threading.Lock(), [0])
        done = [0, self.thread_num]
        for k in range(self.thread_num):
            t = threading.Thread(target=_read_files, name=f"fluidity-open-files-{k}",
                                 args=(self.files, next_file, self.desc, self._casts,
                                       self._queue, done), daemon=True)
            self._threads.append(t)
            t.start()

    def read_next(self):
        if not self._threads:
            self._start_threads()
        return self._queue.pop()

    def _stop(self):
        stop_threads(self._queue, self._threads)

    def _restart(self):
        self._queue.reopen()

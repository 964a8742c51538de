"""From a user's Python generator to a reader's queue.

* `Slot` / `slots_of(feed_list)`: what a fed variable needs (name, shape, dtype, lod_level);
* `samples_to_tensors(samples, slots)`: one batch as LoDTensors from a list of samples
  (tuples with one field per slot; a field of a lod_level-L slot is nested L deep), as
  Paddle's DataFeeder converts;
* `batch_to_tensors(batch, slots)`: a batch the generator made itself (arrays or LoDTensors);
* `batch_samples(sample_gen, batch_size, drop_last)`: sample lists from a sample generator;
* `from_process(source)`: the same items, made by a forked process;
* `QueueFeeder`: a thread that runs a generator into a BlockingQueue, stopped and joined by
  `stop()` or when the feeder is garbage-collected. An exception the generator raises is
  handed to the reading side and raised there, as it is.
"""
import multiprocessing as mp
import queue as queue_mod
import threading
import traceback
import weakref
from collections import namedtuple

import numpy as np

from ..core import dtypes
from ..core.reader import BlockingQueue, mark_passing, stop_threads
from ..core.tensor import LoDTensor
from ..errors import FeedError, FluidityError
from . import decorator

Slot = namedtuple("Slot", "name shape dtype lod_level")


def slots_of(feed_list):
    """[Slot] of data Variables."""
    return [Slot(v.name, tuple(v.shape), dtypes.to_numpy(v.dtype), v.lod_level)
            for v in feed_list]


def _flatten(value, level, lengths):
    """Leaves of a field nested `level` deep; lengths[k] gets the lengths of level k."""
    if level == 0:
        return [value]
    lengths[0].append(len(value))
    out = []
    for v in value:
        out.extend(_flatten(v, level - 1, lengths[1:]) if level > 1 else [v])
    return out


def _field(slot, values):
    """The LoDTensor of one slot from its fields of every sample of the batch."""
    dims = [d for d in slot.shape[1:]]
    if slot.lod_level == 0:
        try:
            arr = np.asarray(values, dtype=slot.dtype)
        except (TypeError, ValueError) as e:
            raise FeedError(f"feed '{slot.name}': cannot make a {np.dtype(slot.dtype)} tensor "
                            f"of the samples' fields: {e}") from None
        if all(d >= 0 for d in dims) and arr.size == len(values) * int(np.prod(dims)):
            arr = arr.reshape([len(values)] + dims)
        return LoDTensor(arr)
    lengths = [[] for _ in range(slot.lod_level)]
    leaves = []
    for v in values:
        leaves.extend(_flatten(v, slot.lod_level, lengths))
    arr = np.asarray(leaves, dtype=slot.dtype)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    t = LoDTensor(arr)
    t.set_recursive_sequence_lengths(lengths)
    return t


def samples_to_tensors(samples, slots):
    """[LoDTensor per slot] of a list of samples."""
    if not samples:
        raise FeedError("a sample list generator gave an empty batch")
    for s in samples:
        if len(s) != len(slots):
            raise FeedError(f"a sample has {len(s)} fields, the feed list "
                            f"{[sl.name for sl in slots]} needs {len(slots)}")
    return [_field(slot, [s[k] for s in samples]) for k, slot in enumerate(slots)]


def batch_to_tensors(batch, slots):
    """[LoDTensor per slot] of a batch made by a batch generator (a list or tuple of
    ndarrays / LoDTensors in feed-list order, or a dict by name)."""
    if isinstance(batch, dict):
        missing = [s.name for s in slots if s.name not in batch]
        if missing:
            raise FeedError(f"a batch generator's dict lacks {missing}")
        batch = [batch[s.name] for s in slots]
    if len(batch) != len(slots):
        raise FeedError(f"a batch generator gave {len(batch)} tensors for the "
                        f"{len(slots)} variables {[s.name for s in slots]}")
    return [t if isinstance(t, LoDTensor) else LoDTensor(np.asarray(t)) for t in batch]


def batch_samples(sample_gen, batch_size, drop_last=True):
    """A sample-list generator function over a sample generator function."""
    batch_size = int(batch_size)
    if batch_size < 1:
        raise FluidityError(f"batch_size must be >= 1, got {batch_size}")

    return decorator.batch(sample_gen, batch_size, drop_last)


class _RemoteError(Exception):
    """An exception raised in a loader's child process, with its traceback text."""


def _child(source, q):
    try:
        for item in source():
            q.put(("item", item))
        q.put(("end", None))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        try:
            q.put(("error", e))
        except Exception:  # an exception that does not pickle
            q.put(("error", _RemoteError(f"{type(e).__name__}: {e}\n"
                                         f"{traceback.format_exc()}")))


def from_process(source, capacity=16):
    """A generator function giving what `source()` gives, made in a forked child process
    (the child is terminated and joined when the generator is closed)."""
    def gen():
        ctx = mp.get_context("fork")
        q = ctx.Queue(capacity)
        p = ctx.Process(target=_child, args=(source, q), daemon=True)
        p.start()
        try:
            while True:
                try:
                    kind, item = q.get(timeout=1.0)
                except queue_mod.Empty:
                    if not p.is_alive():
                        raise FluidityError(f"the loader's child process died (exit code "
                                            f"{p.exitcode})") from None
                    continue
                if kind == "item":
                    yield item
                elif kind == "end":
                    return
                else:
                    raise item
        finally:
            if p.is_alive():
                p.terminate()
            p.join()
            q.close()
            q.join_thread()
    return gen


def _feed_loop(source, convert, q):
    """The feeding thread: push converted items until the end, an error, or the queue is
    killed. Holds no reference to the QueueFeeder."""
    it = None
    try:
        it = iter(source())
        for item in it:
            if not q.push(convert(item)):
                return
        q.close()
    except BaseException as e:  # raised on the reading side
        q.close(mark_passing(e))
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


class QueueFeeder:
    """Runs `source()` (a generator function) through `convert` into a BlockingQueue of
    `capacity` on a thread. `start()` / `stop()`; the thread never outlives the feeder."""

    def __init__(self, capacity, queue=None):
        self.queue = queue if queue is not None else BlockingQueue(capacity)
        self.source = self.convert = None
        self._threads = []
        self._finalizer = weakref.finalize(self, stop_threads, self.queue, self._threads, False)

    def set_source(self, source, convert):
        if not callable(source):
            raise FluidityError(f"a reader's data source must be a generator function "
                                f"(callable), got {type(source).__name__}")
        self.source, self.convert = source, convert

    @property
    def running(self):
        return bool(self._threads)

    def start(self):
        if self.source is None:
            raise FluidityError("the reader has no data source: decorate it (or "
                                "set_*_generator) before start()")
        if self.running:
            raise FluidityError("the reader is already started: reset() it first")
        self.queue.reopen()
        t = threading.Thread(target=_feed_loop, args=(self.source, self.convert, self.queue),
                             name="fluidity-feeder", daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self):
        """Stop the thread (waking it if it waits on the queue) and join it."""
        stop_threads(self.queue, self._threads)

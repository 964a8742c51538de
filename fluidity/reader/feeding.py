"""From a user's Python generator to a reader's queue.

* `Slot` / `slots_of(feed_list)`: what a fed variable needs (name, shape, dtype, lod_level);
* `samples_to_tensors(samples, slots)`: one batch as LoDTensors from a list of samples
  (tuples with one field per slot; a field of a lod_level-L slot is nested L deep), as
  Paddle's DataFeeder converts (`fluid.DataFeeder` calls it);
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


def _nest(slot, field, level, leaves, lengths):
    """Append the instances of a field nested `slot.lod_level - level` deep to `leaves`, and
    the lengths of each nesting level k to lengths[k]."""
    if level == slot.lod_level:
        leaves.append(field)
        return
    try:
        n = len(field)
    except TypeError:
        raise FeedError(f"feed '{slot.name}' has lod_level {slot.lod_level}, so each sample's "
                        f"field must be a sequence nested {slot.lod_level} deep; got "
                        f"{type(field).__name__} {field!r} at depth {level}") from None
    lengths[level].append(n)
    for item in field:
        _nest(slot, item, level + 1, leaves, lengths)


def _target_shape(shape):
    """The variable's shape with -1 for its unknown dim, or None when several dims are
    unknown (then the data is fed as it comes, as in Fluid)."""
    shape = [-1 if d is None or d < 0 else int(d) for d in shape]
    return shape if shape and shape.count(-1) <= 1 else None


def slot_tensor(slot, fields):
    """The LoDTensor of one slot from its fields of every sample of a minibatch: instances
    packed into one array of the slot's dtype, reshaped to the slot's shape (an error when
    they do not fit it), the nesting of a lod_level > 0 slot kept as recursive sequence
    lengths. Fluid's DataFeeder and its py_reader sample lists convert so."""
    leaves, lengths = [], [[] for _ in range(slot.lod_level)]
    for field in fields:
        _nest(slot, field, 0, leaves, lengths)
    try:
        arr = np.array(leaves, dtype=slot.dtype)
    except (ValueError, TypeError) as e:
        raise FeedError(f"feed '{slot.name}': the samples' fields do not form one "
                        f"{np.dtype(slot.dtype)} array (ragged or non-numeric instances; "
                        f"variable shape {list(slot.shape)}, lod_level {slot.lod_level}): "
                        f"{e}") from None
    shape = _target_shape(slot.shape)
    if shape is not None and arr.ndim != len(shape):
        try:
            arr = arr.reshape(shape)
        except ValueError:
            arr = None
    if arr is None or (shape is not None and any(
            want not in (-1, got) for want, got in zip(shape, arr.shape))):
        raise FeedError(f"feed '{slot.name}' is declared with shape {list(slot.shape)}, but "
                        f"the minibatch gives data of shape {list(np.shape(leaves))} "
                        f"({len(leaves)} instances) that does not fit it")
    t = LoDTensor(arr)
    if slot.lod_level:
        t.set_recursive_sequence_lengths(lengths)
    return t


def samples_to_tensors(samples, slots):
    """[LoDTensor per slot] of a minibatch: a list of samples, each a tuple/list with one
    field per slot (a lone field may stand bare where there is one slot)."""
    samples = list(samples)
    if not samples:
        raise FeedError("a sample list generator gave an empty batch")
    for i, s in enumerate(samples):
        if not isinstance(s, (list, tuple, np.ndarray)) and len(slots) == 1:
            samples[i] = s = (s,)
        if len(s) != len(slots):
            raise FeedError(f"sample {i} has {len(s)} fields but the feed list has "
                            f"{len(slots)} variables {[sl.name for sl in slots]}")
    return [slot_tensor(slot, [s[k] for s in samples]) for k, slot in enumerate(slots)]


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
    return [t if isinstance(t, LoDTensor) else LoDTensor(regular_array(t)) for t in batch]


RAGGED_BATCH = ("\n\tFaild to convert input data to a regular ndarray :\n\t* Usually this "
                "means the input data contains nested lists with different lengths. \n\t* "
                "Check the reader function passed to 'decorate_batch_generator' to locate the "
                "data causes this issue.\n\t* Please consider using "
                "'fluid.create_lod_tensor' to convert it to a LoD-Tensor.")


def regular_array(item):
    """`item` (one field of a generated batch) as a regular ndarray; ragged nested lists
    (sequences of different lengths) raise TypeError with Fluid's advice to make a
    LoDTensor (numpy 2 refuses them itself with a ValueError; numpy 1 made an object
    array, which Fluid refused the same way)."""
    try:
        arr = np.asarray(item)
    except ValueError:
        raise TypeError(RAGGED_BATCH) from None
    if arr.dtype == object:
        raise TypeError(RAGGED_BATCH)
    return arr


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

    @property
    def thread(self):
        """The feeding thread of the pass under way (None when there is none)."""
        return self._threads[-1] if self._threads else None

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

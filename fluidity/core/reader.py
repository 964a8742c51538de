"""What a READER variable holds at run time: readers of batches (lists of LoDTensors).

A reader's `read_next()` returns the next batch, or None at the end of the data. Readers
stack: a *decorated* reader (double buffer, shuffle, batch) reads from its underlying one.
`reset()` on any reader of a stack shuts the whole stack down (its root first, so that every
thread blocked on it wakes up, then each decorator, joining its thread) and starts it over;
after a reset the readers read from the beginning again.

`BlockingQueue` is the bounded queue a Python feeding thread fills and a `QueueReader` (what
`create_py_reader` makes) empties; an exception raised by the feeding side is handed to the
reading side and raised there, as the user's own exception (`passes_through`).

No reader thread outlives its reader: threads are joined on reset; when a reader is
garbage-collected, a finalizer (holding no reference to the reader) kills its queue, and its
thread ends as soon as it wakes.
"""
import collections
import random
import threading
import weakref

import numpy as np

from ..errors import EOFException, FluidityError  # noqa: F401 (EOFException re-exported)
from .tensor import LoDTensor


_MARK = "_fluidity_raised_in_reader"


def mark_passing(exc):
    """Mark an exception raised by a user's generator (or a reader's thread) to reach the
    caller of `Executor.run` as it is, not wrapped into an op failure."""
    try:
        setattr(exc, _MARK, True)
    except AttributeError:
        pass
    return exc


def passes_through(exc):
    """True for exceptions a running program hands to its caller unchanged: the end of a
    reader's data and exceptions raised inside a reader's source."""
    return isinstance(exc, EOFException) or getattr(exc, _MARK, False)


class BlockingQueue:
    """A bounded FIFO of batches between one producer thread and readers (Paddle's
    LoDTensorBlockingQueue). `push` blocks while the queue is full and returns False once
    the queue is killed (the reading side went away: stop producing); `pop` blocks while it
    is empty and returns None once it is closed and drained, or raises the producer's error.
    `close(error)` ends the data (after what is queued), `kill()` drops everything and wakes
    every waiter, `reopen()` makes it usable again. `size()` and `capacity()` as Paddle's
    (a DataLoader's `queue`: programs print its fill level)."""

    def __init__(self, capacity):
        capacity = int(capacity)
        if capacity < 1:
            raise FluidityError(f"a reader's queue capacity must be >= 1, got {capacity}")
        self._capacity = capacity
        self._low = capacity // 2
        self._items = collections.deque()
        self._cv = threading.Condition()
        self._closed = self._killed = False
        self._error = None

    def push(self, item):
        with self._cv:
            while len(self._items) >= self._capacity and not self._killed and not self._closed:
                self._cv.wait()
            if self._killed or self._closed:
                return False
            self._items.append(item)
            self._cv.notify_all()
            return True

    def pop(self):
        with self._cv:
            while not self._items and not self._closed and not self._killed:
                self._cv.wait()
            if self._items and not self._killed:
                item = self._items.popleft()
                if len(self._items) <= self._low:   # wake the producer to refill: once per
                    self._cv.notify_all()           # half a queue, not once per batch
                return item
            if self._error is not None and not self._killed:
                err, self._error = self._error, None
                self._killed = True    # raised once; later pops see the end
                raise err
            return None

    def close(self, error=None):
        with self._cv:
            self._closed = True
            if error is not None:
                self._error = error
            self._cv.notify_all()

    def kill(self):
        with self._cv:
            self._killed = True
            self._items.clear()
            self._cv.notify_all()

    def reopen(self):
        with self._cv:
            self._items.clear()
            self._closed = self._killed = False
            self._error = None

    def is_closed(self):
        return self._closed or self._killed

    def size(self):
        """The number of batches queued now."""
        return len(self._items)

    def capacity(self):
        return self._capacity

    __len__ = size


class Reader:
    """Base of every reader. Subclasses implement `read_next()` and, when they hold threads
    or buffers, `_stop()` (stop and join, drop buffers) and `_restart()`."""

    underlying = None
    # True when batches are made ahead by a thread of the reader's own (a queue's feeder,
    # file-reading threads): reading it never waits for the work of making a batch
    asynchronous = False

    def __init__(self):
        self._decorators = weakref.WeakSet()

    def read_next(self):
        raise NotImplementedError

    def _stop(self):
        pass

    def _restart(self):
        pass

    def root(self):
        r = self
        while r.underlying is not None:
            r = r.underlying
        return r

    def _chain(self):
        """This reader and every reader decorating it, bottom-up."""
        out, todo = [], [self]
        while todo:
            r = todo.pop(0)
            out.append(r)
            todo.extend(r._decorators)
        return out

    def shutdown(self):
        """Stop the whole stack this reader belongs to, root first."""
        for r in self.root()._chain():
            r._stop()

    def start(self):
        for r in self.root()._chain():
            r._restart()

    def reset(self):
        self.shutdown()
        self.start()

    def __iter__(self):
        while True:
            batch = self.read_next()
            if batch is None:
                return
            yield batch


class QueueReader(Reader):
    """Reads the batches a Python thread pushes into a BlockingQueue (`create_py_reader`)."""
    asynchronous = True

    def __init__(self, queue, check=None):
        super().__init__()
        self.queue = queue
        self.check = check      # check(batch) raises when a batch does not fit

    def read_next(self):
        batch = self.queue.pop()
        if batch is not None and self.check is not None:
            self.check(batch)
        return batch

    def _stop(self):
        self.queue.kill()

    def _restart(self):
        self.queue.reopen()


class DecoratedReader(Reader):
    def __init__(self, underlying):
        super().__init__()
        if not isinstance(underlying, Reader):
            raise FluidityError(f"a decorated reader needs a reader underneath, got "
                                f"{type(underlying).__name__}")
        self.underlying = underlying
        underlying._decorators.add(self)


def _prefetch_loop(underlying, buf):
    """The double buffer's thread: move batches from `underlying` into `buf` until the end,
    an error, or `buf` is killed. Holds no reference to the DoubleBufferReader."""
    try:
        while True:
            batch = underlying.read_next()
            if batch is None:
                buf.close()
                return
            if not buf.push(batch):
                return
    except BaseException as e:  # handed to the reading side
        buf.close(mark_passing(e))


def stop_threads(queue, threads, join=True):
    """Stop the threads feeding or draining `queue`: kill it (wakes a blocked push or pop),
    join them (never the calling thread itself), forget them. Finalizers pass join=False:
    garbage collection may run anywhere, and a thread waiting on something else (a user's
    generator, an underlying reader) ends as soon as that returns, into the killed queue."""
    queue.kill()
    if join:
        for t in threads:
            if t is not threading.current_thread():
                t.join()
    threads.clear()


class DoubleBufferReader(DecoratedReader):
    """Reads ahead of its consumer on a background thread, `capacity` batches deep
    (`create_double_buffer_reader`). The thread starts at the first read after a (re)start
    and is joined on shutdown. Over an asynchronous reader (a py_reader's queue, open_files'
    threads) the reads go straight through: that reader's thread already works ahead and
    its queue is the buffer, so another thread would only add a hand-off per batch (on a
    CPU place there is no device copy to overlap)."""
    asynchronous = True

    def __init__(self, underlying, capacity=2):
        super().__init__(underlying)
        self._buf = BlockingQueue(capacity)
        self._threads = []
        self._finalizer = weakref.finalize(self, stop_threads, self._buf, self._threads, False)
        if underlying.asynchronous:
            self.read_next = underlying.read_next

    def read_next(self):
        if not self._threads:
            t = threading.Thread(target=_prefetch_loop, args=(self.underlying, self._buf),
                                 name="fluidity-double-buffer", daemon=True)
            self._threads.append(t)
            t.start()
        return self._buf.pop()

    def _stop(self):
        stop_threads(self._buf, self._threads)

    def _restart(self):
        self._buf.reopen()


class ShuffleReader(DecoratedReader):
    """Fills a buffer of `buffer_size` batches from the underlying reader, hands them out in
    a random order, refills (`create_shuffle_reader`)."""

    def __init__(self, underlying, buffer_size, seed=None):
        super().__init__(underlying)
        if int(buffer_size) < 1:
            raise FluidityError(f"shuffle: buffer_size must be >= 1, got {buffer_size}")
        self.buffer_size = int(buffer_size)
        self._rng = random.Random(seed)
        self._buf = []

    def read_next(self):
        if not self._buf:
            for _ in range(self.buffer_size):
                b = self.underlying.read_next()
                if b is None:
                    break
                self._buf.append(b)
            self._rng.shuffle(self._buf)
        return self._buf.pop() if self._buf else None

    def _stop(self):
        self._buf = []


def concat_batches(batches):
    """One batch of the instances of several: each slot's tensors concatenated along the
    first dim; their LoDs joined (every level's offsets shifted)."""
    out = []
    for tensors in zip(*batches):
        arrays = [np.asarray(t) for t in tensors]
        lod = None
        if tensors[0].lod():
            lod = [list(level) for level in tensors[0].lod()]
            for t in tensors[1:]:
                for k, level in enumerate(t.lod()):
                    base = lod[k][-1]
                    lod[k].extend(base + o for o in level[1:])
        out.append(LoDTensor(np.concatenate(arrays, axis=0), lod))
    return out


class BatchReader(DecoratedReader):
    """Batches of `batch_size` of the underlying reader's batches, concatenated
    (`create_batch_reader`); a short last batch is dropped when `discard_leftover`."""

    def __init__(self, underlying, batch_size, discard_leftover=True):
        super().__init__(underlying)
        if int(batch_size) < 1:
            raise FluidityError(f"batch: batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)
        self.discard_leftover = bool(discard_leftover)

    def read_next(self):
        got = []
        while len(got) < self.batch_size:
            b = self.underlying.read_next()
            if b is None:
                break
            got.append(b)
        if not got or (len(got) < self.batch_size and self.discard_leftover):
            return None
        return concat_batches(got)

"""`fluid.io.DataLoader` and `fluid.io.PyReader`: feed a program from Python generators.

    loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=8,
                                                iterable=True)
    loader.set_sample_list_generator(paddle.batch(samples, 64))
    for data in loader():                  # data: [{name: LoDTensor}] (one place)
        exe.run(main, feed=data, fetch_list=[loss])

Iterable loaders run outside the program: a thread (in a forked child process too with
`use_multiprocess=True`) fills a bounded queue, read ahead by one more thread with
`use_double_buffer`; a pass ends when the generator ends, and the threads are joined then (or
when the loop is left early). Non-iterable loaders put the reader in the program (Paddle's
`create_py_reader` / `create_double_buffer_reader` / `read` ops, reader/program.py): per
pass `loader.start()`, `exe.run(main)` until `fluid.core.EOFException`, `loader.reset()`.
Either way an exception the generator raises reaches the caller as it is.

`DataLoader.from_dataset(dataset, places, drop_last)` iterates a Dataset's batches (the
MultiSlot files, piped and in memory as the dataset says) as feed dicts.
"""
from ..core.reader import DoubleBufferReader, QueueReader
from ..errors import FluidityError
from . import feeding
from . import program as reader_program
from .loader_base import DataLoaderBase

class GeneratorLoader(DataLoaderBase):
    """What `DataLoader.from_generator` and `PyReader` return. `drop_last` is Paddle's rule
    for splitting batches over several places; with one place (CPU) nothing is dropped by
    it (`set_sample_generator(..., drop_last)` decides about a short last batch)."""

    def __init__(self, feed_list=None, capacity=None, use_double_buffer=True, iterable=True,
                 return_list=False, use_multiprocess=False, drop_last=True):
        if not feed_list:
            raise FluidityError("DataLoader: feed_list (the data variables) is required")
        if capacity is None or int(capacity) < 1:
            raise FluidityError(f"DataLoader: capacity must be a positive int, got {capacity!r}")
        self.feed_list = list(feed_list)
        self.capacity = int(capacity)
        self.use_double_buffer = bool(use_double_buffer)
        self.iterable = bool(iterable)
        self.return_list = bool(return_list)
        self.use_multiprocess = bool(use_multiprocess)
        self.drop_last = bool(drop_last)
        self._slots = feeding.slots_of(self.feed_list)
        self._names = [s.name for s in self._slots]
        if self.iterable:
            self._feeder = feeding.QueueFeeder(self.capacity)
            self._control = None
        else:
            self._init_non_iterable()

    def _init_non_iterable(self):
        specs = [(tuple(v.shape), v.dtype, v.lod_level) for v in self.feed_list]
        reader, feeder = reader_program.add_queue_reader(
            specs, self.capacity, need_check_feed=[int(v.need_check_feed)
                                                   for v in self.feed_list])
        self._feeder = feeder
        self._control = reader_program.PyReaderControl(feeder, self._slots, reader.name)
        at = reader_program.first_use(self.feed_list)
        if self.use_double_buffer:
            reader = reader_program.add_decorated_reader("create_double_buffer_reader",
                                                         reader, index=at)
            at += 1
        reader_program.insert_read(reader, self.feed_list, at)
        self.reader_var = reader

    # -- sources --------------------------------------------------------------------------
    def _set(self, source, convert):
        if self.use_multiprocess:
            source = feeding.from_process(source, self.capacity)
        self._feeder.set_source(source, convert)
        return self

    def set_sample_generator(self, reader, batch_size, drop_last=True, places=None):
        """`reader()` yields one sample (a tuple with a field per variable) at a time."""
        return self.set_sample_list_generator(
            feeding.batch_samples(reader, batch_size, drop_last), places)

    def set_sample_list_generator(self, reader, places=None):
        """`reader()` yields lists of samples (as `paddle.batch` makes)."""
        slots = self._slots
        return self._set(reader, lambda s: feeding.samples_to_tensors(s, slots))

    def set_batch_generator(self, reader, places=None):
        """`reader()` yields whole batches: a list of ndarrays / LoDTensors per batch."""
        slots = self._slots
        return self._set(reader, lambda b: feeding.batch_to_tensors(b, slots))

    # PyReader's names
    decorate_sample_generator = set_sample_generator
    decorate_sample_list_generator = set_sample_list_generator
    decorate_batch_generator = set_batch_generator

    # -- non-iterable ---------------------------------------------------------------------
    def start(self):
        if self.iterable:
            raise FluidityError("start() is for non-iterable loaders: iterate this one "
                                "(for data in loader(): ...)")
        self._control.start()

    def reset(self):
        if self.iterable:
            raise FluidityError("reset() is for non-iterable loaders: an iterable one resets "
                                "itself at the end of each pass")
        self._control.reset()

    # -- iterable -------------------------------------------------------------------------
    def __call__(self):
        return self.__iter__()

    def __iter__(self):
        if not self.iterable:
            raise FluidityError("this DataLoader is not iterable (iterable=False): use "
                                "start(), exe.run until fluid.core.EOFException, reset()")
        return self._iterate()

    def __next__(self):
        """The next batch of the pass under way (a new pass starts after the last one ended):
        Paddle's iterator protocol, so `next(loader)` works as well as `for`."""
        if getattr(self, "_current", None) is None:
            self._current = iter(self)
        try:
            return next(self._current)
        except StopIteration:
            self._current = None
            raise

    def next(self):
        """Fluid 1.x's name for `__next__` (Python 2's iterator protocol)."""
        return self.__next__()

    def _iterate(self):
        feeder = self._feeder
        if feeder.running:
            feeder.stop()
        reader = QueueReader(feeder.queue)
        top = DoubleBufferReader(reader) if self.use_double_buffer else reader
        feeder.start()
        try:
            for batch in top:
                if self.return_list:
                    yield batch
                else:
                    yield [dict(zip(self._names, batch))]
        finally:
            feeder.stop()
            top.shutdown()


class DataLoader:
    """Paddle's `fluid.io.DataLoader` factory."""

    @staticmethod
    def from_generator(feed_list=None, capacity=None, use_double_buffer=True, iterable=True,
                       return_list=False, use_multiprocess=False, drop_last=True):
        return GeneratorLoader(feed_list, capacity, use_double_buffer, iterable, return_list,
                               use_multiprocess, drop_last)

    @staticmethod
    def from_dataset(dataset, places=None, drop_last=True):
        from ..dataset import DatasetLoader
        return DatasetLoader(dataset, places, drop_last)


class PyReader(GeneratorLoader):
    """Paddle's `fluid.io.PyReader(feed_list, capacity, use_double_buffer, iterable,
    return_list)`: the same loader with the `decorate_*` names."""

    def __init__(self, feed_list=None, capacity=None, use_double_buffer=True, iterable=True,
                 return_list=False):
        super().__init__(feed_list, capacity, use_double_buffer, iterable, return_list)

    def decorate_sample_generator(self, sample_generator, batch_size, drop_last=True,
                                  places=None):
        """`sample_generator()` yields one sample (a tuple with a field per variable) at a
        time; they are batched by `batch_size` (a short last batch dropped by `drop_last`)."""
        return self.set_sample_generator(sample_generator, batch_size, drop_last, places)

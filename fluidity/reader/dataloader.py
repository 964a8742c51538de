"""`fluid.io.DataLoader` and `fluid.io.PyReader`: feed a program from Python generators.

    loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=8,
                                                iterable=True)
    loader.set_sample_list_generator(paddle.batch(samples, 64),
                                     places=fluid.cpu_places(2))
    for data in loader():                  # data: [{name: LoDTensor}, {...}], one per place
        exe.run(data_parallel_program, feed=data, fetch_list=[loss])

Iterable loaders run outside the program: a thread (in a forked child process too with
`use_multiprocess=True`) fills a bounded queue, read ahead by one more thread with
`use_double_buffer`; a pass ends when the generator ends, and the threads are joined then (or
when the loop is left early, or `loader._reset()`). Each step gives one batch per place
(the `places` of `set_*_generator`; one place when None), batch k of a step to place k, as
Fluid 1.8 keeps the order: a pass over B batches on N places is B // N steps, and with
`drop_last=False` one more step of the B % N batches left (which only an inference program
can run: a training step needs every place). Non-iterable loaders put the reader in the
program (Paddle's `create_py_reader` / `create_double_buffer_reader` / `read` ops,
reader/program.py): per pass `loader.start()`, `exe.run(main)` until
`fluid.core.EOFException`, `loader.reset()`; a data-parallel program's N replicas read in
place order, N batches a step. Either way an exception the generator raises reaches the
caller as it is.

`DataLoader.from_dataset(dataset, places, drop_last)` iterates a Dataset's batches (the
MultiSlot files, piped and in memory as the dataset says) as feeds, one per place a step.
"""
import weakref

from ..core.place import Place, as_concrete
from ..core.reader import DoubleBufferReader, QueueReader
from ..errors import FluidityError
from . import feeding
from . import program as reader_program
from .loader_base import DataLoaderBase
from ..unique_name import UniqueNameGenerator

# Names of the non-iterable loaders' queues and readers, as Fluid 1.8's: a counter of their
# own that `unique_name.guard()` does not reset, so that two programs built alike under fresh
# guards (a train and a test program) get loaders fed by different queues, not one queue in
# the global scope that the second loader takes over from the first.
_loader_names = UniqueNameGenerator()


_KEEP_ORDER = [True]


def keep_data_loader_order(*args):
    """Fluid 1.8's switch between the ordered multi-place queue (True, the default: batch k
    of a step goes to place k) and the unordered one (False: each place takes the next
    batch ready). With no argument, the setting. Fluidity's loaders hand batches out in
    order either way, which is one of the schedules the unordered queue allows."""
    if not args:
        return _KEEP_ORDER[0]
    if len(args) != 1 or not isinstance(args[0], bool):
        raise TypeError(f"keep_data_loader_order takes one bool, got {args!r}")
    _KEEP_ORDER[0] = args[0]
    return None


def convert_places(places):
    """The list of places a loader feeds (a place or a list/tuple of them; generic
    `core.Place`s unwrapped); None stays None (one place)."""
    if places is None:
        return None
    places = list(places) if isinstance(places, (list, tuple)) else [places]
    for p in places:
        if not isinstance(p, Place):
            raise TypeError(f"places must be fluid places (fluid.cpu_places(), "
                            f"fluid.CPUPlace(), ...), got {type(p).__name__}")
    if not places:
        raise ValueError("places is empty")
    return [as_concrete(p) for p in places]


def per_place_steps(items, n, drop_last):
    """Items grouped into steps of `n` (one per place, in order); a last short group kept
    unless `drop_last`."""
    group = []
    for item in items:
        group.append(item)
        if len(group) == n:
            yield group
            group = []
    if group and not drop_last:
        yield group


class GeneratorLoader(DataLoaderBase):
    """What `DataLoader.from_generator` and `PyReader` return. `drop_last` is Fluid's rule
    for the last step of a pass over several places: with fewer batches left than places,
    drop them (True) or give a short step (False); with one place it drops nothing
    (`set_sample_generator(..., drop_last)` decides about a short last batch)."""

    @staticmethod
    def _check_input_array(item):
        """`item` as a regular ndarray, or TypeError for ragged data (Fluid's check of a
        batch generator's output)."""
        return feeding.regular_array(item)

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
        self._places = None
        self._pass = None           # weakref to the generator of the pass under way
        self._current = None
        if self.iterable:
            self._feeder = feeding.QueueFeeder(self.capacity)
            self._control = None
        else:
            self._init_non_iterable()

    def _init_non_iterable(self):
        specs = [(tuple(v.shape), v.dtype, v.lod_level) for v in self.feed_list]
        at = reader_program.first_use(self.feed_list)
        reader, feeder = reader_program.add_queue_reader(
            specs, self.capacity, need_check_feed=[int(v.need_check_feed)
                                                   for v in self.feed_list], main_index=at,
            name_generator=_loader_names)
        at += 1
        self._feeder = feeder
        self._control = reader_program.PyReaderControl(feeder, self._slots, reader.name)
        if self.use_double_buffer:
            reader = reader_program.add_decorated_reader("create_double_buffer_reader",
                                                         reader, index=at,
                                                         name=_loader_names("double_buffer"))
            at += 1
        reader_program.insert_read(reader, self.feed_list, at, self.drop_last)
        self.reader_var = reader

    # -- sources --------------------------------------------------------------------------
    def _set(self, source, convert, places):
        if self.use_multiprocess:
            source = feeding.from_process(source, self.capacity)
        self._feeder.set_source(source, convert)
        if self.iterable:
            self._places = convert_places(places)
        return self

    def set_sample_generator(self, reader, batch_size, drop_last=True, places=None):
        """`reader()` yields one sample (a tuple with a field per variable) at a time."""
        return self.set_sample_list_generator(
            feeding.batch_samples(reader, batch_size, drop_last), places)

    def set_sample_list_generator(self, reader, places=None):
        """`reader()` yields lists of samples (as `paddle.batch` makes)."""
        slots = self._slots
        return self._set(reader, lambda s: feeding.samples_to_tensors(s, slots), places)

    def set_batch_generator(self, reader, places=None):
        """`reader()` yields whole batches: a list of ndarrays / LoDTensors per batch."""
        slots = self._slots
        return self._set(reader, lambda b: feeding.batch_to_tensors(b, slots), places)

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

    def _reset(self):
        """End the pass under way (Fluid 1.8's `_reset`): an iterable loader's threads are
        stopped and joined and the next iteration starts a new pass; a non-iterable one is
        `reset()`."""
        if not self.iterable:
            self._control.reset()
            return
        running = self._pass() if self._pass is not None else None
        self._pass, self._current = None, None
        if running is not None:
            running.close()
        if self._feeder.running:
            self._feeder.stop()

    @property
    def thread(self):
        """The thread feeding the queue (None when no pass is under way)."""
        return self._feeder.thread if self.iterable else self._control.feeder.thread

    _thread = thread

    @property
    def queue(self):
        return self._feeder.queue

    # -- iterable -------------------------------------------------------------------------
    def __call__(self):
        return self.__iter__()

    def __iter__(self):
        if not self.iterable:
            raise FluidityError("this DataLoader is not iterable (iterable=False): use "
                                "start(), exe.run until fluid.core.EOFException, reset()")
        running = self._pass() if self._pass is not None else None
        if running is not None:
            running.close()
        gen = self._iterate()
        self._pass = weakref.ref(gen)    # a loop left early still closes it when dropped
        return gen

    def __next__(self):
        """The next step of the pass under way (a new pass starts after the last one ended):
        Paddle's iterator protocol, so `next(loader)` works as well as `for`."""
        if self._current is None:
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
        n = len(self._places) if self._places else 1
        feeder.start()
        try:
            for step in per_place_steps(top, n, self.drop_last):
                yield self._step(step, n)
        finally:
            feeder.stop()
            top.shutdown()

    def _step(self, batches, n):
        """What one step gives: a dict per place (a list of tensors per place with
        return_list; one place's list alone when there is one place)."""
        if self.return_list:
            return batches[0] if n == 1 else list(batches)
        return [dict(zip(self._names, b)) for b in batches]


class DataLoader:
    """Paddle's `fluid.io.DataLoader` factory."""

    @staticmethod
    def from_generator(feed_list=None, capacity=None, use_double_buffer=True, iterable=True,
                       return_list=False, use_multiprocess=False, drop_last=True):
        return GeneratorLoader(feed_list, capacity, use_double_buffer, iterable, return_list,
                               use_multiprocess, drop_last)

    @staticmethod
    def from_dataset(dataset, places=None, drop_last=True):
        """The dataset's batches as feeds: one reader per place over a share of its files,
        each step a list of one feed dict per place (dataset.DatasetLoader)."""
        from ..dataset import DatasetLoader
        return DatasetLoader(dataset, convert_places(places), drop_last)


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

    @property
    def _loader(self):
        """Fluid 1.8's PyReader wraps a DataLoader there; here it is one."""
        return self

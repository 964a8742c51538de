"""fluid.DataFeeder: a minibatch of Python samples -> the feed dict of `Executor.run`.

A sample is a tuple with one field per variable of `feed_list`. A field of a variable with
lod_level 0 is one instance (a number, a list or an array, reshaped to the variable's shape);
a field of a variable with lod_level L > 0 is a sequence nested L deep (a list of sequences
of ... of instances), packed into one LoDTensor whose recursive sequence lengths record the
nesting. Dtypes come from the variables. The conversion is `reader.feeding.samples_to_tensors`, the
one py_reader / DataLoader sample lists go through too.
"""

from .core.place import CPUPlace
from .framework import Program, Variable, cpu_places, default_main_program
# Fluid 1.8 keeps its argument checks here; programs and layers import them from here
from .framework import check_dtype, check_type, check_variable_and_dtype  # noqa: F401
from .reader import feeding

__all__ = ["DataFeeder"]


class DataFeeder:
    """DataFeeder(feed_list, place, program=None): `feed_list` holds Variables or their names
    (looked up in `program`, default the default main program)."""

    def __init__(self, feed_list, place, program=None):
        if not isinstance(feed_list, (list, tuple)):
            raise TypeError(f"DataFeeder: feed_list must be a list of Variables or names, got "
                            f"{type(feed_list).__name__}")
        program = default_main_program() if program is None else program
        if not isinstance(program, Program):
            raise TypeError(f"DataFeeder: program must be a fluid.Program, got "
                            f"{type(program).__name__}")
        self.feed_names, self.feed_shapes, self.feed_dtypes, self.feed_lod_level = [], [], [], []
        feed_vars = []
        for var in feed_list:
            if isinstance(var, str):
                var = program.global_block().var(var)
            if not isinstance(var, Variable):
                raise TypeError(f"DataFeeder: feed_list must hold Variables or their names, "
                                f"got {type(var).__name__}")
            feed_vars.append(var)
            self.feed_names.append(var.name)
            self.feed_shapes.append(list(var.shape))
            self.feed_dtypes.append(var.dtype)
            self.feed_lod_level.append(var.lod_level)
        self._slots = feeding.slots_of(feed_vars)
        self.place = place

    def feed(self, iterable):
        """A minibatch (an iterable of samples, each a tuple/list with one field per slot)
        -> {variable name: LoDTensor}."""
        tensors = feeding.samples_to_tensors(iterable, self._slots)
        return dict(zip(self.feed_names, tensors))

    def _num_places(self, num_places):
        if num_places is not None:
            return int(num_places)
        if isinstance(self.place, CPUPlace):
            return len(cpu_places())
        return 1

    def feed_parallel(self, iterable, num_places=None):
        """One minibatch per place -> a generator of one feed dict per place."""
        n = self._num_places(num_places)
        batches = list(iterable)
        if len(batches) != n:
            raise ValueError(f"DataFeeder.feed_parallel: got {len(batches)} minibatches for "
                             f"{n} places; give one minibatch per place")
        for batch in batches:
            yield self.feed(batch)

    def decorate_reader(self, reader, multi_devices, num_places=None, drop_last=True):
        """A batched reader -> a reader of feed dicts (a list of num_places dicts each when
        multi_devices)."""
        def feed_reader():
            if not multi_devices:
                for batch in reader():
                    yield self.feed(batch)
                return
            n = self._num_places(num_places)
            group = []
            for batch in reader():
                group.append(batch)
                if len(group) == n:
                    yield list(self.feed_parallel(group, n))
                    group = []
            if group and not drop_last:
                raise ValueError(f"DataFeeder.decorate_reader: {len(group)} minibatches are "
                                 f"left over for {n} places; use drop_last=True or a reader "
                                 f"whose number of batches divides among the places")
        return feed_reader

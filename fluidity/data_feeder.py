"""fluid.DataFeeder: a minibatch of Python samples -> the feed dict of `Executor.run`.

A sample is a tuple with one field per variable of `feed_list`. A field of a variable with
lod_level 0 is one instance (a number, a list or an array, reshaped to the variable's shape);
a field of a variable with lod_level L > 0 is a sequence nested L deep (a list of sequences
of ... of instances), packed into one LoDTensor whose recursive sequence lengths record the
nesting. Dtypes come from the variables.
"""

import numpy as np

from .core import dtypes
from .core.place import CPUPlace
from .core.tensor import LoDTensor
from .framework import Program, Variable, cpu_places, default_main_program

__all__ = ["DataFeeder"]


class _SlotConverter:
    """Collects one slot's fields of a minibatch and packs them into a LoDTensor."""

    def __init__(self, name, shape, lod_level, dtype):
        self.name, self.shape, self.lod_level = name, list(shape), lod_level
        self.dtype = dtypes.to_numpy(dtype)
        self.data = []
        self.lengths = [[] for _ in range(lod_level)]

    def feed(self, field):
        self._add(field, 0)

    def _add(self, field, level):
        if level == self.lod_level:
            self.data.append(field)
            return
        try:
            n = len(field)
        except TypeError:
            raise ValueError(f"DataFeeder: slot '{self.name}' has lod_level {self.lod_level}, "
                             f"so each sample's field must be a sequence nested "
                             f"{self.lod_level} deep; got {type(field).__name__} {field!r} at "
                             f"depth {level}") from None
        self.lengths[level].append(n)
        for item in field:
            self._add(item, level + 1)

    def _target_shape(self):
        """The variable's shape with -1 for its unknown dim, or None when several dims are
        unknown (then the data is fed as it comes, as in Fluid)."""
        shape = [-1 if d is None or d < 0 else int(d) for d in self.shape]
        return shape if shape and shape.count(-1) <= 1 else None

    def done(self):
        try:
            arr = np.array(self.data, dtype=self.dtype)
        except (ValueError, TypeError) as e:
            raise ValueError(f"DataFeeder: the fields of slot '{self.name}' do not form one "
                             f"{self.dtype} array (ragged or non-numeric instances; "
                             f"variable shape {self.shape}, lod_level {self.lod_level}): "
                             f"{e}") from None
        shape = self._target_shape()
        if shape is not None and arr.ndim != len(shape):
            try:
                arr = arr.reshape(shape)
            except ValueError:
                arr = None
        if arr is None or (shape is not None and any(
                want not in (-1, got) for want, got in zip(shape, arr.shape))):
            got = list(np.shape(self.data))
            raise ValueError(f"DataFeeder: slot '{self.name}' is declared with shape "
                             f"{self.shape}, but the minibatch gives data of shape {got} "
                             f"({len(self.data)} instances) that does not fit it")
        t = LoDTensor()
        t.set(arr)
        if self.lod_level:
            t.set_recursive_sequence_lengths(self.lengths)
        return t


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
        for var in feed_list:
            if isinstance(var, str):
                var = program.global_block().var(var)
            if not isinstance(var, Variable):
                raise TypeError(f"DataFeeder: feed_list must hold Variables or their names, "
                                f"got {type(var).__name__}")
            self.feed_names.append(var.name)
            self.feed_shapes.append(list(var.shape))
            self.feed_dtypes.append(var.dtype)
            self.feed_lod_level.append(var.lod_level)
        self.place = place

    def _converters(self):
        return [_SlotConverter(n, s, lvl, d) for n, s, lvl, d in
                zip(self.feed_names, self.feed_shapes, self.feed_lod_level, self.feed_dtypes)]

    def feed(self, iterable):
        """A minibatch (an iterable of samples, each a tuple/list with one field per slot)
        -> {variable name: LoDTensor}."""
        conv = self._converters()
        for i, sample in enumerate(iterable):
            if not isinstance(sample, (list, tuple, np.ndarray)):
                sample = (sample,) if len(conv) == 1 else sample
            if len(sample) != len(conv):
                raise ValueError(f"DataFeeder: sample {i} has {len(sample)} fields but the "
                                 f"feed list has {len(conv)} variables {self.feed_names}")
            for c, field in zip(conv, sample):
                c.feed(field)
        return {c.name: c.done() for c in conv}

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

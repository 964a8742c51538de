"""Fluid 1.6-1.8's `fluid.incubate.data_generator`: turn raw data into MultiSlot text lines,
usually as a Dataset's `pipe_command` (a script that reads raw lines on stdin and writes
MultiSlot lines on stdout):

    import fluidity.incubate.data_generator as dg

    class CriteoReader(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            def reader():
                fields = line.rstrip("\\n").split("\\t")
                yield [("dense_input", [float(v or 0) for v in fields[1:14]]),
                       ("C1", [hash(fields[14]) % 10**6]), ("click", [int(fields[0])])]
            return reader

    CriteoReader().run_from_stdin()        # dataset.set_pipe_command("python reader.py")

Each sample is a list (or tuple) of `(slot name, [values])` in the order of the Dataset's
`set_use_var`; a line is `count v1 v2 ...` per slot, space-separated (`3 1926 8 17 1 1` for
words [1926, 8, 17] and label [1]): the format the MultiSlot parser (datafeed/multislot.py)
reads, unchanged. `MultiSlotDataGenerator` checks every sample: names match the first
sample's, in order; values are ints or floats (a slot becomes "float" once it holds one);
no slot is empty. `MultiSlotStringDataGenerator` takes values already as strings and
writes them as they are (no checks, for speed).

`generate_batch(samples)` sees `set_batch(n)` samples at a time (32 by default), e.g. to pad
a batch's sequences to one length; by default it passes them on unchanged.
"""
import sys

import numpy as np

__all__ = ["MultiSlotDataGenerator", "MultiSlotStringDataGenerator"]


class DataGenerator:
    """The base class: override `generate_sample(line)` (and optionally `generate_batch`);
    `run_from_stdin()` / `run_from_memory()` write the samples' lines to stdout."""

    def __init__(self):
        self._proto_info = None
        self.batch_size_ = 32

    def _set_line_limit(self, line_limit):
        if not isinstance(line_limit, int):
            raise ValueError(f"line_limit{type(line_limit)} must be in int type")
        if line_limit < 1:
            raise ValueError("line_limit can not less than 1")
        self._line_limit = line_limit

    def set_batch(self, batch_size):
        """How many samples `generate_batch` gets at a time."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise ValueError(f"set_batch: batch_size must be a positive int, got "
                             f"{batch_size!r}")
        self.batch_size_ = int(batch_size)

    def _write_samples(self, lines, out):
        """Generate from each of `lines` (None for run_from_memory), batch, write."""
        batch = []
        for line in lines:
            for sample in self.generate_sample(line)():
                if sample is None:
                    continue
                batch.append(sample)
                if len(batch) == self.batch_size_:
                    self._write_batch(batch, out)
                    batch = []
        if batch:
            self._write_batch(batch, out)

    def _write_batch(self, samples, out):
        out.write("".join(self._gen_str(s) for s in self.generate_batch(samples)()))

    def run_from_memory(self):
        """Write the samples of `generate_sample(None)` to stdout (debugging, benchmarks)."""
        self._write_samples([None], sys.stdout)
        sys.stdout.flush()

    def run_from_stdin(self):
        """Write the samples generated from each line of stdin to stdout: what a Dataset's
        pipe_command runs."""
        self._write_samples(sys.stdin, sys.stdout)
        sys.stdout.flush()

    def _gen_str(self, line):
        """One sample as a MultiSlot text line (with its newline)."""
        raise NotImplementedError("pls use MultiSlotDataGenerator or PairWiseDataGenerator")

    def generate_sample(self, line):
        """Override: return a function that yields the samples of one raw line, each
        [(name, [feasign, ...]), ...] (or a tuple of such pairs)."""
        raise NotImplementedError(
            "Please rewrite this function to return a list or tuple: "
            "[(name, [feasign, ...]), ...] or ((name, [feasign, ...]), ...)")

    def generate_batch(self, samples):
        """Override to rework a batch of samples; returns a function yielding samples."""
        def local_iter():
            yield from samples
        return local_iter


def _check_sample(line):
    """The sample as a list or tuple: a `zip` (what a Python 2 era `generate_sample` that
    yields `zip(names, values)` gives under Python 3) is read into a list, as Paddle 2.0
    does; anything else is refused."""
    if isinstance(line, zip):
        return list(line)
    if not isinstance(line, (list, tuple)):
        raise ValueError(f"the output of process() must be in list or tuple type, got "
                         f"{type(line).__name__}: Example: [('words', [1926, 8, 17]), "
                         f"('label', [1])]")
    return line


def _field(item, index):
    """(name, elements) of one (name, values) pair, checked."""
    if not isinstance(item, (list, tuple)) or len(item) != 2:
        raise ValueError(f"field #{index} of a sample must be a (name, [values]) pair, got "
                         f"{item!r}")
    name, elements = item
    if not isinstance(name, str):
        raise ValueError(f"name{type(name)} must be in str type")
    if not isinstance(elements, list):
        raise ValueError(f"elements{type(elements)} must be in list type (slot '{name}')")
    if not elements:
        raise ValueError(f"the elements of each field can not be empty, you need padding it "
                         f"in process() (slot '{name}')")
    return name, elements


def _is_float(v):
    return isinstance(v, (float, np.floating))


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


class MultiSlotStringDataGenerator(DataGenerator):
    """Values are strings, written as they are: `[("words", ["1926", "08"]), ...]`."""

    def _gen_str(self, line):
        line = _check_sample(line)
        out = []
        for name, elements in line:
            out.append(str(len(elements)))
            out.extend(elements)
        return " ".join(out) + "\n"


class MultiSlotDataGenerator(DataGenerator):
    """Values are ints (uint64 slots) or floats (float slots), checked; the slot names and
    their order are fixed by the first sample (`_proto_info`: [(name, "uint64"|"float")])."""

    def _gen_str(self, line):
        line = _check_sample(line)
        first = self._proto_info is None
        if first:
            info = []
        elif len(line) != len(self._proto_info):
            raise ValueError(f"the complete field set of two given line are inconsistent: "
                             f"{len(line)} fields where the first sample had "
                             f"{len(self._proto_info)} ({[n for n, _ in self._proto_info]})")
        else:
            info = self._proto_info
        parts = []
        for index, item in enumerate(line):
            name, elements = _field(item, index)
            if first:
                info.append((name, "uint64"))
            elif name != info[index][0]:
                raise ValueError(f"the field name of two given line are not match: "
                                 f"require<{info[index][0]}>, get<{name}>.")
            kind = info[index][1]
            for elem in elements:
                if _is_float(elem):
                    kind = "float"
                elif not _is_int(elem):
                    raise ValueError(f"the type of element{type(elem)} must be in int or "
                                     f"float (slot '{name}', value {elem!r})")
            if kind != info[index][1]:
                info[index] = (name, kind)
            parts.append(str(len(elements)))
            parts.extend(map(str, elements))
        if first:
            self._proto_info = info
        return " ".join(parts) + "\n"

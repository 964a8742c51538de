"""Reader decorators of `paddle.reader` (Fluid 1.x): a reader is a function of no arguments
that returns an iterable of samples; a decorator takes readers and returns a new reader.
`batch` groups samples into minibatches (lists), the input of `DataFeeder.feed`."""
import itertools
import math
import multiprocessing
import queue
import random
import shlex
import subprocess
import threading
import zlib

from ..errors import ReaderError

__all__ = ["map_readers", "buffered", "compose", "chain", "shuffle", "ComposeNotAligned",
           "firstn", "xmap_readers", "cache", "multiprocess_reader", "batch", "PipeReader",
           "Fake"]


def _check_reader(reader, who):
    if not callable(reader):
        raise TypeError(f"{who}: a reader must be a function that returns an iterable of "
                        f"samples, got {type(reader).__name__}")


def _check_positive(value, who, what):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{who}: {what} should be a positive integer, got {value!r}")


def map_readers(func, *readers):
    """Samples func(s1, s2, ...) over the samples of `readers` taken in step."""
    for r in readers:
        _check_reader(r, "map_readers")

    def reader():
        return map(func, *[r() for r in readers])
    return reader


def shuffle(reader, buf_size):
    """Shuffle within windows of `buf_size` samples."""
    _check_reader(reader, "shuffle")
    _check_positive(buf_size, "shuffle", "buf_size")

    def data_reader():
        buf = []
        for sample in reader():
            buf.append(sample)
            if len(buf) >= buf_size:
                random.shuffle(buf)
                yield from buf
                buf = []
        random.shuffle(buf)
        yield from buf
    return data_reader


def chain(*readers):
    """The samples of every reader, one reader after the other."""
    for r in readers:
        _check_reader(r, "chain")

    def reader():
        return itertools.chain(*[r() for r in readers])
    return reader


class ComposeNotAligned(ValueError):
    pass


def _flatten(sample):
    return sample if isinstance(sample, tuple) else (sample,)


def compose(*readers, **kwargs):
    """Samples that join the fields of the readers' samples taken in step (tuples are
    flattened one level): (a, b) and c give (a, b, c). With check_alignment (default) readers
    of different lengths raise ComposeNotAligned; without, output stops at the shortest."""
    check_alignment = kwargs.pop("check_alignment", True)
    if kwargs:
        raise TypeError(f"compose: unexpected keyword arguments {sorted(kwargs)}")
    for r in readers:
        _check_reader(r, "compose")

    def reader():
        its = [r() for r in readers]
        if not check_alignment:
            for parts in zip(*its):
                yield sum((_flatten(p) for p in parts), ())
            return
        for parts in itertools.zip_longest(*its, fillvalue=_END):
            if any(p is _END for p in parts):
                raise ComposeNotAligned("compose: the readers have different numbers of "
                                        "samples")
            yield sum((_flatten(p) for p in parts), ())
    return reader


_END = object()


def buffered(reader, size):
    """Read ahead up to `size` samples on a thread."""
    _check_reader(reader, "buffered")
    _check_positive(size, "buffered", "size")

    def data_reader():
        q = queue.Queue(maxsize=size)
        errors = []

        def fill():
            try:
                for sample in reader():
                    q.put(sample)
            except BaseException as e:  # handed to the consumer, raised there
                errors.append(e)
            finally:
                q.put(_END)

        threading.Thread(target=fill, daemon=True).start()
        while True:
            sample = q.get()
            if sample is _END:
                break
            yield sample
        if errors:
            raise errors[0]
    return data_reader


def firstn(reader, n):
    """The first `n` samples."""
    _check_reader(reader, "firstn")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"firstn: n should be a non-negative integer, got {n!r}")

    def data_reader():
        return itertools.islice(reader(), n)
    return data_reader


def cache(reader):
    """Read all samples once; every later pass replays them from memory."""
    _check_reader(reader, "cache")
    samples = []
    filled = []

    def data_reader():
        if not filled:
            samples.extend(reader())
            filled.append(True)
        return iter(samples)
    return data_reader


def xmap_readers(mapper, reader, process_num, buffer_size, order=False):
    """mapper(sample) over the samples, on `process_num` threads with a queue of
    `buffer_size`; `order=True` keeps the reader's order."""
    _check_reader(reader, "xmap_readers")
    _check_positive(process_num, "xmap_readers", "process_num")
    _check_positive(buffer_size, "xmap_readers", "buffer_size")

    def data_reader():
        in_q, out_q = queue.Queue(buffer_size), queue.Queue(buffer_size)
        errors = []

        def read():
            try:
                for i, sample in enumerate(reader()):
                    in_q.put((i, sample))
            except BaseException as e:
                errors.append(e)
            for _ in range(process_num):
                in_q.put(_END)

        def work():
            while True:
                item = in_q.get()
                if item is _END:
                    break
                try:
                    out_q.put((item[0], mapper(item[1])))
                except BaseException as e:
                    errors.append(e)
                    out_q.put((item[0], _END))
            out_q.put(_END)

        threading.Thread(target=read, daemon=True).start()
        for _ in range(process_num):
            threading.Thread(target=work, daemon=True).start()
        done, pending, nxt = 0, {}, 0
        while done < process_num:
            item = out_q.get()
            if item is _END:
                done += 1
                continue
            if item[1] is _END:
                continue
            if not order:
                yield item[1]
                continue
            pending[item[0]] = item[1]
            while nxt in pending:
                yield pending.pop(nxt)
                nxt += 1
        if errors:
            raise errors[0]
        for i in sorted(pending):
            yield pending[i]
    return data_reader


def _run_into(reader, q):
    try:
        for sample in reader():
            if sample is None:
                raise ValueError("multiprocess_reader: a sample is None")
            q.put(sample)
        q.put(("__fluidity_reader_end__",))
    except BaseException as e:  # the parent raises it
        q.put(("__fluidity_reader_error__", repr(e)))


def multiprocess_reader(readers, use_pipe=True, queue_size=1000):
    """The samples of several readers, each read in its own process (order between readers
    not kept). Samples must be picklable."""
    if not isinstance(readers, (list, tuple)) or not readers:
        raise ValueError("multiprocess_reader: readers must be a non-empty list of readers")
    for r in readers:
        _check_reader(r, "multiprocess_reader")
    _check_positive(queue_size, "multiprocess_reader", "queue_size")

    def data_reader():
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue(queue_size)
        procs = [ctx.Process(target=_run_into, args=(r, q), daemon=True) for r in readers]
        for p in procs:
            p.start()
        finished = 0
        try:
            while finished < len(procs):
                sample = q.get()
                if isinstance(sample, tuple) and len(sample) in (1, 2) and \
                        sample[0] in ("__fluidity_reader_end__", "__fluidity_reader_error__"):
                    if sample[0] == "__fluidity_reader_error__":
                        raise ReaderError(f"multiprocess_reader: a reader failed: {sample[1]}")
                    finished += 1
                    continue
                yield sample
        finally:
            for p in procs:
                p.join(timeout=1)
                if p.is_alive():
                    p.terminate()
    return data_reader


def batch(reader, batch_size, drop_last=False):
    """Group samples into lists of `batch_size` (the last one shorter unless drop_last)."""
    _check_reader(reader, "batch")
    if isinstance(batch_size, float) and math.isfinite(batch_size):
        # Fluid takes int(batch_size): scripts pass `args.batch_size / dev_count`
        batch_size = int(batch_size)
    _check_positive(batch_size, "batch", "batch_size")

    def batch_reader():
        b = []
        for sample in reader():
            b.append(sample)
            if len(b) == batch_size:
                yield b
                b = []
        if b and not drop_last:
            yield b
    return batch_reader


class PipeReader:
    """paddle.reader.PipeReader(command, bufsize=8192, file_type="plain"): the output of
    `command` (split into arguments as a shell would, run without a shell, as Paddle does),
    read `bufsize` bytes at a time; `file_type` "gzip" decompresses it on the way.

        for line in PipeReader("hadoop fs -cat /data/part-0").get_line(): ...
    """

    def __init__(self, command, bufsize=8192, file_type="plain"):
        if not isinstance(command, str):
            raise TypeError(f"PipeReader: command must be a string, got "
                            f"{type(command).__name__}")
        if file_type not in ("plain", "gzip"):
            raise TypeError(f"PipeReader: file_type must be 'plain' or 'gzip', got "
                            f"{file_type!r}")
        _check_positive(bufsize, "PipeReader", "bufsize")
        self.command, self.bufsize, self.file_type = command, bufsize, file_type

    def _chunks(self):
        dec = zlib.decompressobj(32 + zlib.MAX_WBITS) if self.file_type == "gzip" else None
        proc = subprocess.Popen(shlex.split(self.command), stdout=subprocess.PIPE)
        finished = False
        try:
            while True:
                buf = proc.stdout.read(self.bufsize)
                if not buf:
                    break
                yield (dec.decompress(buf) if dec else buf).decode()
            if dec:
                yield dec.flush().decode()
            finished = True
        finally:
            proc.stdout.close()
            if not finished:          # left early: the command's output is not needed
                proc.kill()
            code = proc.wait()
        if code:
            raise RuntimeError(f"PipeReader: command {self.command!r} exited with status "
                               f"{code}")

    def get_line(self, cut_lines=True, line_break="\n"):
        """The output's lines (without `line_break`; the last one too where the output does
        not end with it), or with cut_lines=False the decoded chunks as they are read."""
        if not cut_lines:
            yield from (c for c in self._chunks() if c)
            return
        rest = ""
        for chunk in self._chunks():
            *lines, rest = (rest + chunk).split(line_break)
            yield from lines
        if rest:
            yield rest


class Fake:
    """paddle.reader.Fake: `Fake()(reader, data_num)` is a reader that yields the first
    sample of `reader` `data_num` times (to time a model without reading data)."""

    def __init__(self):
        self.data = None
        self.yield_num = 0

    def __call__(self, reader, data_num):
        _check_reader(reader, "Fake")
        if isinstance(data_num, bool) or not isinstance(data_num, int) or data_num < 0:
            raise ValueError(f"Fake: data_num must be a non-negative integer, got "
                             f"{data_num!r}")

        def fake_reader():
            if self.data is None:
                self.data = next(iter(reader()))
            while self.yield_num < data_num:
                yield self.data
                self.yield_num += 1
            self.yield_num = 0
        return fake_reader

"""Where MultiSlot text comes from: a file, a file piped through a shell command, or lines
held in memory. The MultiSlot reader (multislot.py) takes any of them where it takes a
path, so a Dataset with a `pipe_command` streams the command's output into the parser and
an InMemoryDataset hands its records to the workers without writing a file.

A source has a `name` (what errors and batch origins call it) and two methods:

* `chunks(size)`: the text as bytes, about `size` bytes at a time; a chunk may end inside a
  line (the reader carries the rest over), except for memory sources, whose chunks end at
  a line's end.
* `locate(line)`: (path, line) of the 1-based `line` of this source's text in the data the
  user gave: the file and line itself, the pipe's output line, or for a memory record the
  file and line it was loaded from.

Sources are cheap to make and used once per pass: each iteration calls `chunks` again (a
pipe source starts its command again).
"""
import os
import subprocess
import threading

from .errors import DataError

__all__ = ["FileSource", "PipeSource", "CommandSource", "MemorySource", "as_source",
           "is_source", "run_pipe"]

_STDERR_KEEP = 4096       # bytes of a failing command's stderr kept for its error


class Source:
    name = "?"

    def chunks(self, size):
        raise NotImplementedError

    def locate(self, line):
        return self.name, line

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


def is_source(obj):
    return isinstance(obj, Source)


class FileSource(Source):
    """A MultiSlot file read as it is."""

    def __init__(self, path):
        self.path = self.name = os.fspath(path)

    def chunks(self, size):
        try:
            f = open(self.path, "rb")
        except OSError as e:
            raise DataError(f"cannot open data file {self.path}: {e.strerror}") from None
        with f:
            while True:
                data = f.read(size)
                if not data:
                    return
                yield data


def as_source(item):
    """A Source for a path (a FileSource) or a Source itself."""
    return item if is_source(item) else FileSource(item)


class _StderrTail(threading.Thread):
    """Drains a command's stderr (so it can never block on a full pipe) and keeps the
    last few KB of it for the error message."""

    def __init__(self, pipe):
        super().__init__(daemon=True, name="fluidity-pipe-stderr")
        self.pipe, self.tail = pipe, b""
        self.start()

    def run(self):
        for data in iter(lambda: self.pipe.read(_STDERR_KEEP), b""):
            self.tail = (self.tail + data)[-_STDERR_KEEP:]

    def text(self):
        self.join(5)
        return self.tail.decode("utf-8", "replace").strip()


def _failure(command, path, status, err):
    how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
    on = f" on {path}" if path is not None else ""
    return DataError(f"dataset: pipe command {command!r} failed{on} ({how})"
                     f"{': ' + err if err else ''}")


def run_pipe(command, path, size):
    """Yield the stdout of shell `command` run with file `path` on stdin (None: no input),
    `size` bytes at a time (a read of the pipe releases the GIL). A command that exits
    non-zero raises DataError with its exit status and the end of its stderr; stopping
    early (the consumer closes the generator) kills the command."""
    try:
        stdin = open(path, "rb") if path is not None else open(os.devnull, "rb")
    except OSError as e:
        raise DataError(f"dataset: cannot read {path}: {e.strerror or e}") from None
    with stdin:
        try:
            proc = subprocess.Popen(command, shell=True, stdin=stdin, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, bufsize=0)
        except OSError as e:
            raise DataError(f"dataset: cannot start pipe command {command!r}: {e}") from None
    err = _StderrTail(proc.stderr)
    finished = False
    try:
        out = proc.stdout
        while True:
            data = out.read(size)
            if not data:
                break
            yield data
        finished = True
    finally:
        if not finished and proc.poll() is None:
            proc.kill()
        status = proc.wait()
        proc.stdout.close()
        text = err.text()
        proc.stderr.close()
    if status != 0:
        raise _failure(command, path, status, text)


class PipeSource(Source):
    """The output of a shell command run with a file on its stdin (a Dataset's
    pipe_command), streamed: nothing is written to disk."""

    def __init__(self, path, command):
        self.path, self.command = os.fspath(path), str(command)
        self.name = f"{self.path} | {self.command}"

    def chunks(self, size):
        return run_pipe(self.command, self.path, size)


class CommandSource(Source):
    """The output of a shell command that fetches the data itself (a Dataset's
    download_cmd for a remote path, piped through its pipe_command)."""

    def __init__(self, command, name):
        self.command, self.name = str(command), str(name)

    def chunks(self, size):
        return run_pipe(self.command, None, size)


class MemorySource(Source):
    """Records (lines, bytes without their newline) `records[start:stop]` of an in-memory
    store, given to the parser `size` bytes or so at a time without a copy of the store.
    `origin(i)` -> (path, line) of record i (for errors), or None."""

    def __init__(self, records, start, stop, name, origin=None):
        self.records, self.start, self.stop = records, int(start), int(stop)
        self.name, self._origin = name, origin

    def __len__(self):
        return self.stop - self.start

    def chunks(self, size):
        recs, a, stop = self.records, self.start, self.stop
        if a >= stop:
            return
        # lines per chunk from the first records' length, so a chunk is about `size` bytes
        probe = recs[a:min(stop, a + 64)]
        per = max(1, size // (sum(map(len, probe)) // len(probe) + 1))
        while a < stop:
            b = min(stop, a + per)
            yield b"\n".join(recs[a:b]) + b"\n"
            a = b

    def locate(self, line):
        i = self.start + line - 1
        if self._origin is not None and self.start <= i < self.stop:
            where = self._origin(i)
            if where is not None:
                return where
        return self.name, line

"""Hogwild workers as threads or forked processes, and the parent's watch over them.

The parent must notice a worker's end at once, whatever ended it — an exception the worker
reports, a signal (SIGKILL; the kernel's OOM killer sends it too), a thread that returned
without a word — even while the other workers keep it busy with their reports. Hence:

* each worker process writes to a pipe of its own, never to a queue shared with the others:
  a worker killed while sending holds no lock the others or the parent wait on;
* the parent waits on every pipe and every process's sentinel at once
  (`multiprocessing.connection.wait`); a sentinel that fires is a worker that exited, and
  what it wrote before is read first, so an exit after a reported error or "done" is told
  apart from a death. The parent closes its copy of each pipe's write end, so reading a
  dead worker's pipe ends (EOF) instead of waiting forever;
* the stop flag is a byte of shared memory read without a lock (an Event's lock, held by a
  killed worker, would hang everyone who asks);
* nothing a worker writes per batch shares a cache line with another worker's writes (the
  board's rows are a cache line each), so the workers' stores never serialize;
* each worker writes where it is — file index, first and last line of its batch — on a
  shared board, which the parent still reads after the worker is gone: a death is reported
  with the worker's identity and its last file:line;
* a worker process asks Linux to kill it when the parent dies (no orphan keeps training).

A worker is a callable `run(send)`; `send(message)` hands a tuple to the parent.
"""
import ctypes
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import queue
import signal
import threading
import time

import numpy as np

from .shared_memory import CACHE_LINE, aligned_empty, shared_empty

PROCESS_STOP_GRACE_S = 0.3   # after a failure, how long worker processes get to stop
THREAD_STOP_GRACE_S = 10.0   # threads cannot be killed: how long to wait for them to stop
PR_SET_PDEATHSIG = 1


class StopFlag:
    """One shared byte: set by the parent (or a failing worker), read per batch (by the
    compiled worker loop too, through `a`'s address). On a cache line of its own: only
    reads hit it until the run stops."""

    def __init__(self, shared):
        self.a = shared_empty((1,), np.int8) if shared else aligned_empty(1, np.int8)
        self.a[0] = 0

    def is_set(self):
        return bool(self.a[0])

    def set(self):
        self.a[0] = 1


class PositionBoard:
    """Per worker, the batch it runs now: (file index, first line, last line), 1-based
    lines, -1 before its first batch. Written per batch by the worker (three stores) into
    a row of its own cache line (a row is ROW int64s wide), which only the parent reads:
    two workers never write one line."""

    ROW = CACHE_LINE // 8

    def __init__(self, n, files, shared):
        self.files = files
        shape = (n, self.ROW)
        self.a = shared_empty(shape, np.int64) if shared else aligned_empty(shape, np.int64)
        self.a[:] = -1

    def row(self, wid):
        """Worker `wid`'s row: [file index, first line, last line, padding...]."""
        return self.a[wid]

    def set(self, wid, file_index, first, last):
        row = self.a[wid]
        row[0], row[1], row[2] = file_index, first, last

    def where(self, wid):
        """'path:first-last' of the worker's last batch, or None before its first."""
        f, a, b = (int(v) for v in self.a[wid, :3])
        if f < 0 or a < 0:
            return None
        return f"{self.files[f]}:{a}" if a == b else f"{self.files[f]}:{a}-{b}"


def _die_with_parent(parent_pid):
    """Linux: SIGKILL this worker when the parent dies, so no orphan keeps training."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:   # the parent died before the request took
        os._exit(1)


def _process_main(run, conn, parent_pid, setup):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    _die_with_parent(parent_pid)
    if setup is not None:
        setup()
    code = 1
    try:
        code = run(conn.send)
    finally:
        try:
            conn.close()
        finally:
            os._exit(code)


def signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class ProcessWorkers:
    """Worker processes forked from this one, each with its own pipe to the parent."""

    kind = "processes"

    def __init__(self, runs, setup=None):
        ctx = mp.get_context("fork")
        self.procs, self.conns, self._runs, self._setup, self._ctx = [], [], runs, setup, ctx
        self._open = set()
        self._ended = set()     # workers whose exit wait() has reported

    def start(self):
        parent = os.getpid()
        for run in self._runs:
            r, w = self._ctx.Pipe(duplex=False)
            p = self._ctx.Process(target=_process_main, args=(run, w, parent, self._setup),
                                  daemon=True)
            p.start()
            w.close()   # only the worker holds the write end: its death reads as EOF
            self._open.add(len(self.procs))
            self.procs.append(p)
            self.conns.append(r)

    def describe(self, wid):
        p = self.procs[wid]
        return f"worker {wid} (pid {p.pid})"

    def end_reason(self, wid):
        code = self.procs[wid].exitcode
        if code is not None and code < 0:
            name = signal_name(-code)
            why = " (the kernel's out-of-memory killer sends it too)" if -code == \
                signal.SIGKILL else ""
            return f"was killed by {name}{why}"
        return f"exited (code {code}) without finishing its work"

    def _drain(self, wid, msgs, to_eof=False):
        conn = self.conns[wid]
        try:
            while to_eof or conn.poll():
                msgs.append(conn.recv())
        except (EOFError, OSError):
            self._open.discard(wid)

    def wait(self, timeout):
        """(messages, wids of workers that exited) within `timeout` seconds."""
        live = [self.conns[w] for w in self._open]
        # every worker whose end is not reported yet, dead or alive: asking `exitcode`
        # here would reap one that died between two waits, and its end would never be
        # reported (a SIGKILL landing while a report was being handled hung the run)
        sentinels = {self.procs[w].sentinel: w for w in range(len(self.procs))
                     if w not in self._ended}
        ready = mp_connection.wait(live + list(sentinels), timeout)
        msgs, ended = [], []
        for obj in ready:
            if obj in sentinels:
                continue
            self._drain(self.conns.index(obj), msgs)
        for obj in ready:
            if obj in sentinels:   # exited: what it wrote is all in the pipe now
                wid = sentinels[obj]
                self.procs[wid].join(0.1)
                if wid in self._open:
                    self._drain(wid, msgs, to_eof=True)
                self._ended.add(wid)
                ended.append(wid)
        return msgs, ended

    def shutdown(self, grace):
        """Wait up to `grace` seconds for the workers to exit (reading what they send, so
        none blocks on a full pipe), then terminate, then kill, the rest."""
        deadline = time.monotonic() + grace
        while any(p.exitcode is None for p in self.procs) and time.monotonic() < deadline:
            self.wait(min(0.05, max(0.0, deadline - time.monotonic())))
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = [p for p in self.procs if p.exitcode is None]
            for p in alive:
                try:
                    os.kill(p.pid, sig)
                except ProcessLookupError:
                    pass
            for p in alive:
                p.join(0.5)
        for c in self.conns:
            c.close()


class ThreadWorkers:
    """Worker threads of this process; their messages go through one queue."""

    kind = "threads"

    def __init__(self, runs):
        self.q = queue.Queue()
        self.exitcodes = [None] * len(runs)
        self.threads = [threading.Thread(target=self._main, args=(i, run), daemon=True,
                                         name=f"fluidity-worker-{i}")
                        for i, run in enumerate(runs)]
        self._ended = set()

    def _main(self, wid, run):
        try:
            self.exitcodes[wid] = run(self.q.put)
        finally:
            self.q.put(("_ended", wid))

    def start(self):
        for t in self.threads:
            t.start()

    def describe(self, wid):
        return f"worker {wid} (thread {self.threads[wid].name})"

    def end_reason(self, wid):
        return "ended without finishing its work"

    def wait(self, timeout):
        msgs, ended = [], []
        try:
            item = self.q.get(timeout=timeout)
            while True:
                if item[0] == "_ended":
                    ended.append(item[1])
                else:
                    msgs.append(item)
                item = self.q.get_nowait()
        except queue.Empty:
            pass
        return msgs, ended

    def shutdown(self, grace):
        """Threads cannot be killed: they stop at their next batch (the stop flag); wait up
        to `grace` seconds for that. Daemons, so a straggler never keeps the process."""
        deadline = time.monotonic() + grace
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))

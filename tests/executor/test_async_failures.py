"""AsyncExecutor failures as a user meets them: a worker killed (SIGKILL, as the OOM killer
does) or failing (an op on bad data) stops the run within a second, naming the worker and
the file lines it was on; nothing is left running, and the parameters stay usable."""
import multiprocessing as mp
import os
import re
import signal
import sys
import time

import numpy as np
import pytest

import fluidity as fluid
from fluidity.datafeed import DataFeedDesc
from fluidity.datafeed.generate import generate_ctr
from fluidity.errors import ExecutionError
from fluidity.executor import native_loop
from fluidity.executor.async_executor import AsyncExecutor
from paths import EXAMPLES

sys.path.insert(0, EXAMPLES)
from ctr_dnn import build_ctr_dnn  # noqa: E402

VOCAB = 2000


@pytest.fixture(scope="module")
def ctr(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctr_fail")
    info = generate_ctr(str(d), 12000, files=4, seed=3, vocab=VOCAB, sparse_slots=4,
                        dense_slots=3)
    return {"dir": str(d), "files": sorted(info["files"]),
            "desc": os.path.join(str(d), "data_feed.prototxt")}


def _model(**kw):
    args = dict(dense_dim=3, vocab=VOCAB, emb_dim=4, hidden=(16,), lr=0.05, optimizer="sgd",
                with_auc=False)
    args.update(kw)
    main, startup, test, v = build_ctr_dnn(["C1", "C2", "C3", "C4"], **args)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return main, v, exe, scope


def _bad_file(ctr, tmp_path, line, token, value):
    """A copy of the first data file with one token of 1-based `line` replaced."""
    lines = open(ctr["files"][0]).read().splitlines()
    toks = lines[line - 1].split()
    toks[token] = value
    lines[line - 1] = " ".join(toks)
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _assert_names_line(err, path, line):
    m = re.search(re.escape(path) + r":(\d+)(?:-(\d+))?", str(err))
    assert m, str(err)
    first, last = int(m.group(1)), int(m.group(2) or m.group(1))
    assert first <= line <= last, (line, str(err))


def _saves_after(main, exe, scope, where):
    """The parameters are finite, save, and load back the same."""
    w = np.asarray(scope.find_var("SparseFeatFactors").get_tensor())
    assert np.isfinite(w).all()
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, where, main)
    again = fluid.Scope()
    with fluid.scope_guard(again):
        fluid.io.load_persistables(exe, where, main)
    np.testing.assert_array_equal(np.asarray(again.find_var("SparseFeatFactors").get_tensor()),
                                  w)


def _state(pid):
    """The state letter of process `pid` (/proc/<pid>/stat field 3: R, S, Z, ...)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _cpu_ticks(pid):
    """User + system CPU ticks process `pid` has used (/proc/<pid>/stat fields 14, 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_a_killed_worker_process_stops_the_run_within_a_second(ctr, tmp_path):
    """SIGKILL one of two worker processes mid-run while the other has lots left to do:
    the run fails within a second naming the dead worker and its file and lines, no
    worker is left, and the model saves."""
    main, v, exe, scope = _model()
    killed, reports = {}, []

    def kill_one(seen, means):
        # a few reports in, so both workers are on their files even on a loaded machine
        # (a worker killed before its first batch has no file to name); the victim is
        # the child that has run the most
        reports.append(seen)
        if not killed and len(reports) >= 4:
            victim = max(mp.active_children(), key=lambda p: _cpu_ticks(p.pid))
            killed.update(pid=victim.pid, t=time.perf_counter())
            os.kill(victim.pid, signal.SIGKILL)
            # the worker is dead before the executor waits again: a death between two
            # waits must be reported too (it once went unseen and the run hung)
            while _state(victim.pid) != "Z" and time.perf_counter() - killed["t"] < 2:
                time.sleep(0.001)

    with pytest.raises(ExecutionError) as ei:
        AsyncExecutor().run(main, DataFeedDesc(ctr["desc"]), ctr["files"] * 8, 2,
                            fetch=[v["loss"]], scope=scope, workers="processes",
                            callback=kill_one, report_every=2)
    late = time.perf_counter() - killed["t"]
    assert late < 1.0, f"the death was reported {late:.2f}s after the kill"
    msg = str(ei.value)
    assert f"(pid {killed['pid']}) was killed by SIGKILL" in msg and "while on " in msg
    assert re.search(r"while on .*part-\d+\.txt:\d+-\d+|while on .*\.txt:\d+", msg), msg
    assert mp.active_children() == []     # the survivor is gone too: no orphan
    _saves_after(main, exe, scope, str(tmp_path / "saved"))


def test_an_exception_in_a_worker_thread_stops_the_run_within_a_second(ctr, tmp_path,
                                                                        monkeypatch):
    """An op fails in one compiled worker thread (an id past the table) while the other
    thread has lots left: the error reaches the caller within a second of the failure,
    naming the worker, the op and the file line; the threads have stopped."""
    line = 2500
    bad = _bad_file(ctr, tmp_path, line, 5, "999999")    # C1's id, past the 2000 rows
    failed = {}
    real = native_loop.CompiledWorkerStep.error

    def error(self, status, message):
        failed.setdefault("t", time.perf_counter())
        return real(self, status, message)

    monkeypatch.setattr(native_loop.CompiledWorkerStep, "error", error)
    main, v, exe, scope = _model()
    with pytest.raises(ExecutionError) as ei:
        AsyncExecutor().run(main, DataFeedDesc(ctr["desc"]), [bad] + ctr["files"] * 8, 2,
                            fetch=[v["loss"]], scope=scope, workers="threads")
    late = time.perf_counter() - failed["t"]
    assert late < 1.0, f"the failure was reported {late:.2f}s after it happened"
    assert re.search(r"worker \d \(thread fluidity-worker-\d\) failed", str(ei.value))
    assert "out of range" in str(ei.value)
    _assert_names_line(ei.value, bad, line)
    import threading
    assert not [t for t in threading.enumerate() if t.name.startswith("fluidity-worker")]
    _saves_after(main, exe, scope, str(tmp_path / "saved"))


# worker processes run the interpreter; threads the compiled loop (read_ahead=False) or the
# executor's native plan per batch (read_ahead=True)
MODES = [("processes", False), ("threads", False), ("threads", True)]


@pytest.mark.parametrize("workers,read_ahead", MODES)
@pytest.mark.parametrize("what,token,value,says", [
    ("id past the table", 5, "999999", "out of range"),
    ("label past the classes", -1, "7", "label 7 is out of range"),
])
def test_an_op_error_on_fed_data_names_its_file_and_lines(ctr, tmp_path, workers, read_ahead,
                                                          what, token, value, says):
    line = 437
    bad = _bad_file(ctr, tmp_path, line, token, value)
    main, v, exe, scope = _model()
    with pytest.raises(ExecutionError) as ei:
        AsyncExecutor().run(main, DataFeedDesc(ctr["desc"]), [bad], 1, fetch=[v["loss"]],
                            scope=scope, workers=workers, read_ahead=read_ahead)
    assert says in str(ei.value)
    _assert_names_line(ei.value, bad, line)
    assert ei.value.origin.startswith(bad)


def test_fetch_reports_agree_in_both_worker_modes(ctr, caplog, capsys):
    """The fetch targets' means come back per report and over the run, alike for worker
    threads and worker processes on the same data; with debug, each report is a line on
    stdout (as Fluid prints it) and the same figures in the `fluidity` logger."""
    import logging
    got = {}
    for workers in ("threads", "processes"):
        main, v, exe, scope = _model()
        seen = []
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="fluidity"):
            res = AsyncExecutor().run(main, DataFeedDesc(ctr["desc"]), ctr["files"][:2], 2,
                                      fetch=[v["loss"]], fetch_info=["loss"], scope=scope,
                                      workers=workers, debug=True,
                                      callback=lambda n, f: seen.append(f[v["loss"].name]))
        assert res.mode == workers and res.examples == 6000 and seen
        assert res.history[-1][0] == 6000
        lines = [r.getMessage() for r in caplog.records if "ex/s, loss=" in r.getMessage()]
        assert len(lines) == len(seen) and "6,000 examples" in lines[-1]
        printed = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("time: ")]
        assert len(printed) == len(seen) and all("loss: [" in ln for ln in printed)
        got[workers] = res[0]
    assert got["threads"] == pytest.approx(got["processes"], rel=0.05), got


PARENT = r"""
import multiprocessing as mp, sys
sys.path.insert(0, {examples!r})
import fluidity as fluid
from ctr_dnn import build_ctr_dnn
from fluidity.datafeed import DataFeedDesc
main, startup, test, v = build_ctr_dnn(["C1", "C2", "C3", "C4"], dense_dim=3, vocab=2000,
                                       emb_dim=4, hidden=(16,), optimizer="sgd",
                                       with_auc=False)
scope = fluid.Scope()
fluid.Executor().run(startup, scope=scope)
told = []
def tell(n, f):
    if not told:
        told.append(1)
        print(" ".join(str(p.pid) for p in mp.active_children()), flush=True)
fluid.AsyncExecutor().run(main, DataFeedDesc({desc!r}), {files!r}, 2, workers="processes",
                          scope=scope, callback=tell, report_every=1)
"""


def _gone(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" in f.read()      # a zombie has stopped; its reaper is late
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG: Linux")
def test_worker_processes_do_not_outlive_a_killed_parent(ctr):
    """SIGKILL the training process itself: its worker processes end with it (no orphan
    goes on training over the shared parameters)."""
    import subprocess
    code = PARENT.format(examples=EXAMPLES, desc=ctr["desc"], files=ctr["files"] * 20)
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 2, parent.stderr.read()[-2000:]
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    orphans = [p for p in pids if not _gone(p)]
    for p in orphans:        # a failing run leaves no orphan training on either
        os.kill(p, signal.SIGKILL)
    assert not orphans, f"worker processes {orphans} outlived their parent"

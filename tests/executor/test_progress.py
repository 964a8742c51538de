"""Progress of a training run from files as a user sees it: Fluid's print_period lines on
stdout when stdout is not a terminal (a pipe, as under nohup, CI or `| tee`), the same
figures in the logger (FLUIDITY_LOG_LEVEL), a bar with total and ETA on a terminal, and
the totals the bar counts."""
import io
import os
import re
import subprocess
import sys
import textwrap

import pytest

from fluidity.core import log as flog
from fluidity.executor import progress
from fluidity.executor.progress import Reporter, count_examples

# a tiny CTR-like model trained by train_from_dataset over 2 files of 64 lines
SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    import fluidity as fluid
    d = sys.argv[1]
    rng = np.random.default_rng(0)
    files = []
    for k in range(2):
        path = os.path.join(d, f"part-{k}.txt")
        with open(path, "w") as f:
            for _ in range(64):
                ids = rng.integers(0, 50, size=3)
                f.write(f"3 {' '.join(map(str, ids))} 1 {int(ids[0] % 2)}\\n")
        files.append(path)
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", [1], dtype="int64", lod_level=1)
        y = fluid.layers.data("y", [1], dtype="int64")
        emb = fluid.layers.sequence_pool(fluid.layers.embedding(ids, [50, 4]), "sum")
        p = fluid.layers.fc(emb, 2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(p, y))
        acc = fluid.layers.accuracy(p, y)
        fluid.optimizer.SGD(0.1).minimize(loss)
    ds = fluid.DatasetFactory().create_dataset("QueueDataset")
    ds.set_use_var([ids, y]); ds.set_batch_size(4); ds.set_thread(1); ds.set_filelist(files)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    exe.train_from_dataset(main, ds, fetch_list=[loss, acc], fetch_info=["loss", "acc"],
                           print_period=8)
    print("trained")
""")

LINE = re.compile(r"^time: \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\], batch: \[(\d+)\], "
                  r"loss: \[([-0-9.e]+)\], acc: \[([-0-9.e]+)\]$")


def _train(tmp_path, **env):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, **env))


def test_train_from_dataset_prints_fluid_lines_to_a_pipe(tmp_path):
    r = _train(tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("time: ")]
    # 128 examples in batches of 4: 32 batches, a line every 8
    assert len(lines) == 4, r.stdout
    batches = []
    for ln in lines:
        m = LINE.match(ln)
        assert m, ln
        batches.append(int(m.group(1)))
        assert 0 <= float(m.group(3)) <= 1 and float(m.group(2)) > 0
    assert batches == [8, 16, 24, 32]
    assert r.stdout.rstrip().endswith("trained")
    assert "fluidity INFO" not in r.stderr      # the logger stays quiet unless asked


def test_the_logger_gets_the_same_figures_when_asked(tmp_path):
    r = _train(tmp_path, FLUIDITY_LOG_LEVEL="INFO")
    assert r.returncode == 0, r.stderr[-3000:]
    logged = [ln for ln in r.stderr.splitlines() if "AsyncExecutor: batch" in ln]
    assert len(logged) == 4, r.stderr
    assert re.search(r"batch 32, 128 examples, [\d,]+ ex/s, loss=[\d.e-]+ acc=[\d.e-]+$",
                     logged[-1]), logged[-1]
    assert "AsyncExecutor: done: 128 examples in 32 batches" in r.stderr


def test_bar_has_total_and_eta(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    out = io.StringIO()
    rep = Reporter(["loss"], print_period=2, bar=True, total=40, stdout=out)
    rep.start()
    for _ in range(4):
        rep.report(1, 10, [0.5])
    rep.close()
    text = err.getvalue()
    assert "40.0/40.0" in text and "ex/s" in text and "loss=0.5000" in text
    assert re.search(r"<\d\d:\d\d", text)          # tqdm's ETA
    assert out.getvalue().count("time: ") == 2     # the lines above the bar, on stdout


def test_period_means_are_weighted_by_examples():
    out = io.StringIO()
    rep = Reporter(["loss"], print_period=2, bar=False, stdout=out)
    rep.report(1, 30, [1.0])
    rep.report(1, 10, [3.0])
    assert "loss: [1.500000]" in out.getvalue()


def test_count_examples(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"1 1\n" * 10)
    b.write_bytes(b"1 2\n" * 5 + b"1 3")           # a last line without its newline
    assert count_examples([str(a), str(b)]) == (16, True)
    monkeypatch.setattr(progress, "COUNT_EXACT_BYTES", 8)   # estimated when large
    n, exact = count_examples([str(a), str(b)])
    assert not exact and 15 <= n <= 17

    class Pipe:
        pass
    assert count_examples([Pipe()]) == (None, False)


def test_log_level_switch(monkeypatch):
    import logging
    logger = logging.getLogger("fluidity")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logger.level)
    assert flog.configure_from_env({"FLUIDITY_LOG_LEVEL": "debug"}) is logger
    assert logger.level == logging.DEBUG and len(logger.handlers) == 1
    assert flog.configure_from_env({}) is None
    with pytest.raises(ValueError, match="expected one of DEBUG"):
        flog.parse_level("loud")


def _scalars(logdir):
    """{tag: [(step, value)]} from the TensorBoard event files under `logdir`."""
    import struct
    from tensorboardX.proto import event_pb2
    out = {}
    for name in os.listdir(logdir):
        data = open(os.path.join(logdir, name), "rb").read()
        i = 0
        while i < len(data):
            (n,) = struct.unpack_from("<Q", data, i)
            ev = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
            i += 12 + n + 4
            for v in ev.summary.value:
                out.setdefault(v.tag, []).append((ev.step, v.simple_value))
    return out


def test_train_from_dataset_writes_tensorboard_scalars(tmp_path):
    pytest.importorskip("tensorboardX")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("print_period=8)", "print_period=8, tensorboard_dir=sys.argv[2])"))
    r = subprocess.run([sys.executable, str(script), str(tmp_path), str(tmp_path / "tb")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    tags = _scalars(tmp_path / "tb")
    assert set(tags) == {"train/loss", "train/acc", "train/examples_per_sec"}
    steps = [s for s, _ in tags["train/loss"]]
    assert steps == sorted(steps) and steps[-1] == 32
    assert all(v > 0 for _, v in tags["train/examples_per_sec"])


def test_tensorboard_without_tensorboardx_says_what_to_install(monkeypatch):
    from fluidity.errors import FluidityError
    from fluidity.executor import scalars
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(FluidityError, match=r"pip install 'fluidity\[tensorboard\]'"):
        scalars.ScalarWriter("unused")

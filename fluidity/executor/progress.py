"""What a training run from files tells its user while it runs.

A run (AsyncExecutor.run, exe.train_from_dataset) calls one `Reporter` with each report its
workers send (every few batches: batches done, examples, the means of the fetched values),
and the reporter shows them in every place a user may be looking:

* **stdout**, as Fluid prints them: with fetch targets and a print period (train_from_dataset's
  `print_period`, AsyncExecutor.run's `debug=True` or `fetch_info`), one line per period,
  ``time: [2024-05-01 12:00:00], batch: [200], loss: [0.693147], auc: [0.712345]``,
  labelled by `fetch_info` (default: the variables' names). They reach a notebook, a file
  under nohup, a CI log and a pipe through `tee` alike.
* **a tqdm bar** on stderr when stderr is a terminal: examples done out of the total the
  files hold (counted before the run, or estimated from their first megabytes when they are
  large), examples/s, the ETA and the latest fetched means. The stdout lines are written
  above it, so neither garbles the other.
* **the `fluidity` logger** at INFO: the same figures as the stdout lines (and, when no line
  is printed, one every few seconds), with examples/s and the ETA. `FLUIDITY_LOG_LEVEL=INFO`
  shows them on stderr (fluidity/log.py).
* **TensorBoard scalars** when the run is given `tensorboard_dir` (executor/scalars.py).

The reporter is the one place the run's progress goes through: the workers and how they
send reports are the run's business; what is shown, where and how often is this module's.
"""
import logging
import os
import sys
import time

logger = logging.getLogger("fluidity")

LOG_EVERY_S = 5.0          # a logger line at most this often when no stdout line is due
COUNT_EXACT_BYTES = 512 << 20   # count the lines of files up to this size in all
SAMPLE_BYTES = 4 << 20          # else estimate from this much of the first file


def count_examples(items):
    """(examples the run will read, exact?) from its files: MultiSlot text holds one example
    a line. Files totalling up to COUNT_EXACT_BYTES are counted (a few tenths of a second);
    larger ones are estimated from the first SAMPLE_BYTES of a file; an in-memory source
    knows its length. (None, False) when a source cannot say (a pipe's output)."""
    total, paths, size = 0, [], 0
    for item in items:
        if isinstance(item, (str, os.PathLike)):
            path = os.fspath(item)
        elif hasattr(item, "__len__"):
            total += len(item)
            continue
        elif type(item).__name__ == "FileSource":
            path = item.path
        else:
            return None, False
        try:
            size += os.path.getsize(path)
        except OSError:
            return None, False
        paths.append(path)
    if not paths:
        return total, True
    if size <= COUNT_EXACT_BYTES:
        return total + sum(_count_lines(p) for p in paths), True
    sample = _sample_line_bytes(paths)
    if sample is None:
        return None, False
    return total + int(size / sample), False


def _count_lines(path, chunk=1 << 20):
    n, last = 0, b"\n"
    try:
        with open(path, "rb") as f:
            while True:
                buf = f.read(chunk)
                if not buf:
                    break
                n += buf.count(b"\n")
                last = buf[-1:]
    except OSError:
        return 0
    return n + (last != b"\n")      # a last line without its newline


def _sample_line_bytes(paths):
    """Mean bytes per line in the first SAMPLE_BYTES of the first readable file."""
    for p in paths:
        try:
            with open(p, "rb") as f:
                buf = f.read(SAMPLE_BYTES)
        except OSError:
            continue
        lines = buf.count(b"\n")
        if lines:
            return len(buf[:buf.rfind(b"\n") + 1]) / lines
    return None


def _fmt_value(v):
    return f"{v:.6f}" if abs(v) >= 1e-4 or v == 0 else f"{v:.6e}"


def _eta(seconds):
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Reporter:
    """Shows a run's progress; `report()` per worker report, `close()` at the end.

    labels: what each fetched value is called (fetch_info); print_period: batches between
    stdout lines (None: none are printed; "report": a line per report, as Fluid's
    AsyncExecutor with debug=True); bar: True, False or "auto" (a bar when stderr is
    a terminal); total: the examples the run will read (None: unknown), `exact` whether it
    was counted; writer: a ScalarWriter or None; what: the name log lines start with."""

    def __init__(self, labels, print_period=None, bar="auto", total=None, exact=True,
                 writer=None, what="AsyncExecutor", stdout=None, every=LOG_EVERY_S):
        self.labels, self.print_period = list(labels), print_period
        self.total, self.exact, self.writer, self.what = total, exact, writer, what
        self.stdout = stdout
        self.every = every
        self.batches = self.examples = 0
        self.t0 = self.last_log = time.perf_counter()
        self.next_line = print_period if isinstance(print_period, int) else None
        self.period = [0, [0.0] * len(self.labels)]   # examples, example-weighted sums
        if bar == "auto":
            bar = sys.stderr.isatty()
        self.bar = None
        if bar:
            from tqdm import tqdm
            self.bar = tqdm(total=total or None, unit="ex", unit_scale=True, dynamic_ncols=True,
                            smoothing=0.1, desc=what if exact or total is None else what + " ~")

    # -- from the run ----------------------------------------------------------------------
    def start(self):
        """The workers start now: rates and ETAs count from here."""
        self.t0 = self.last_log = time.perf_counter()

    def report(self, batches, examples, means):
        """One worker's report: `batches` more batches of `examples` examples done, and the
        fetched values' means over them."""
        self.batches += batches
        self.examples += examples
        n, sums = self.period
        self.period = [n + examples, [s + m * examples for s, m in zip(sums, means)]]
        elapsed = max(time.perf_counter() - self.t0, 1e-9)
        rate = self.examples / elapsed
        if self.bar is not None:
            self.bar.update(examples)
            if self.labels:
                self.bar.set_postfix_str(self._pairs(means, "={:.4f}"), refresh=False)
        if self.writer is not None:
            self.writer.add_scalars(self.batches, dict(zip(self.labels, means)),
                                    examples_per_sec=rate)
        if self.print_period == "report" and self.labels:
            self._line(rate)
        elif self.print_period and self.labels and self.batches >= self.next_line:
            while self.next_line <= self.batches:
                self.next_line += self.print_period
            self._line(rate)
        elif time.perf_counter() - self.last_log >= self.every:
            self._log(rate, self._period_means())

    def close(self):
        """The end of the run (whether it ended well or not)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        elapsed = time.perf_counter() - self.t0
        logger.info("%s: done: %s examples in %d batches, %.1f s, %s ex/s", self.what,
                    f"{self.examples:,}", self.batches, elapsed,
                    f"{self.examples / max(elapsed, 1e-9):,.0f}")

    # -- output ----------------------------------------------------------------------------
    def _period_means(self):
        n, sums = self.period
        self.period = [0, [0.0] * len(self.labels)]
        return [s / n for s in sums] if n else [float("nan")] * len(self.labels)

    def _pairs(self, means, fmt):
        return " ".join(f"{k}{fmt.format(v)}" for k, v in zip(self.labels, means))

    def _line(self, rate):
        """Fluid's line for a print period, on stdout (above the bar), and in the log."""
        means = self._period_means()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        line = f"time: [{stamp}], batch: [{self.batches}], " + ", ".join(
            f"{k}: [{_fmt_value(v)}]" for k, v in zip(self.labels, means))
        out = self.stdout or sys.stdout
        if self.bar is not None:
            self.bar.write(line, file=out)
        else:
            print(line, file=out, flush=True)
        self._log(rate, means)

    def _log(self, rate, means):
        self.last_log = time.perf_counter()
        if self.total:
            left = (self.total - self.examples) / rate if rate > 0 else None
            done = f" of {'' if self.exact else '~'}{self.total:,} " \
                   f"({100 * self.examples / self.total:.0f}%), ETA {_eta(left)}"
        else:
            done = ""
        logger.info("%s: batch %d, %s examples%s, %s ex/s%s", self.what, self.batches,
                    f"{self.examples:,}", done, f"{rate:,.0f}",
                    (", " + self._pairs(means, "={:.6g}")) if self.labels else "")

"""Training curves for TensorBoard: scalars written as TensorBoard event files.

`ScalarWriter(logdir)` writes through tensorboardX (`pip install 'fluidity[tensorboard]'`),
chosen by weight and fit: it is pure Python, installs in under 1 MB over what Fluidity already
needs (numpy, protobuf, packaging), and its files are TensorBoard's own. VisualDL's writer
would pull in 36 packages (Flask, pandas, matplotlib, ...; about 75 MB of wheels) to write
the same scalars. Open the curves with `tensorboard --logdir DIR` (`pip install
tensorboard`).

`AsyncExecutor.run(..., tensorboard_dir=DIR)` and `exe.train_from_dataset(...,
tensorboard_dir=DIR)` write each fetched value (under its fetch_info label) and examples/s
against the batch count; the examples take `--tensorboard DIR`. Runs one after another
into the same directory in one process (one per epoch, say) continue one curve: each
writer starts its steps where the last one on that directory stopped.
"""
import os

from ..errors import FluidityError

_next_step = {}     # logdir -> the step the next writer on it starts from (this process)

EXTRA = "pip install 'fluidity[tensorboard]' (or pip install tensorboardX)"


def _summary_writer():
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise FluidityError(f"TensorBoard scalars need tensorboardX, which is not installed: "
                            f"{EXTRA}") from None
    return SummaryWriter


class ScalarWriter:
    """Scalars under `logdir` (made if missing), one event file per writer; `prefix` goes
    before every tag ("train/loss")."""

    def __init__(self, logdir, prefix="train/"):
        self.logdir, self.prefix = str(logdir), prefix
        self._key = os.path.abspath(self.logdir)
        self.base = self.last = _next_step.get(self._key, 0)
        self._w = _summary_writer()(logdir=self.logdir, flush_secs=10)

    def add_scalar(self, tag, value, step):
        """`value` at this writer's `step` (counted from its first, continued on the curve
        of earlier writers on the same directory)."""
        self.last = max(self.last, self.base + int(step))
        self._w.add_scalar(self.prefix + tag, float(value), self.base + int(step))

    def add_scalars(self, step, values, examples_per_sec=None):
        """Each {tag: value} at `step`, and examples/s under 'examples_per_sec'."""
        for tag, v in values.items():
            self.add_scalar(tag, v, step)
        if examples_per_sec is not None:
            self.add_scalar("examples_per_sec", examples_per_sec, step)

    def flush(self):
        self._w.flush()

    def close(self):
        _next_step[self._key] = max(_next_step.get(self._key, 0), self.last)
        self._w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_writer(logdir):
    """A ScalarWriter for `logdir`, or None when `logdir` is None or empty."""
    return ScalarWriter(logdir) if logdir else None

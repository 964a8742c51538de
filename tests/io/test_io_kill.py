"""Kill -9 at a random moment during a save over an existing one: the directory is always
exactly the old save or the new one (byte for byte, after the next load settles it),
loads, and nothing is left behind after the next save.

Each trial forks a child that sets changed values and saves them over the old save; the
parent SIGKILLs it at a time drawn uniformly over the length of an unkilled save. The
child's renames, links and file writes are slowed down (a few ms each) so that kill times
land at every step of the protocol, not only at its start. fsync is a no-op here: a killed
process loses nothing the kernel already has (fsync guards against power loss, which this
test does not simulate), and 80 trials of fsyncs would take minutes.
"""
import os
import random
import signal
import time

import pytest

import fluidity as fluid
from fluidity.core import serialization as ser
from io_models import adam_mlp, hidden_entries, picture, same_values, set_values, values

TRIALS = 20
STEP_DELAY_S = 0.002
OLD, NEW = 1, 2


def _slow_down():
    """In the child: every rename, link and file write of the save takes a little longer."""
    def slowed(fn):
        def wrapper(*a, **k):
            time.sleep(STEP_DELAY_S)
            out = fn(*a, **k)
            time.sleep(STEP_DELAY_S)
            return out
        return wrapper
    for name in ("rename", "replace", "link"):
        setattr(os, name, slowed(getattr(os, name)))
    ser.atomic_write = slowed(ser.atomic_write)


class Kind:
    """How one kind of save saves, settles-and-reads, and what its directory looks like."""

    def __init__(self, save, load, user_file=True, saved=None):
        self.save, self.load, self.user_file = save, load, user_file
        self.saved = saved  # the variables the save holds (None: every persistable)


def _dir_kinds(exe, main, x, y):
    def load_inference(d):
        fluid.io.load_inference_model(d, exe)
    return {
        "separate": Kind(lambda d: fluid.io.save_persistables(exe, d, main),
                         lambda d: fluid.io.load_persistables(exe, d, main)),
        "combined": Kind(lambda d: fluid.io.save_persistables(exe, d, main, filename="all"),
                         lambda d: fluid.io.load_persistables(exe, d, main, filename="all")),
        "inference": Kind(lambda d: fluid.io.save_inference_model(d, ["x"], [y], exe, main),
                          load_inference, saved=["b1", "b2", "w1", "w2"]),
        "checkpoint": Kind(
            lambda d: fluid.io.save_checkpoint(exe, d, trainer_args={"step": 1},
                                               main_program=main, max_num_checkpoints=2),
            lambda d: fluid.io.load_checkpoint(exe, d, main_program=main), user_file=False),
    }


def _state(kind, d, main):
    """What a reader finds: the files (for checkpoints, of the newest one) and values."""
    kind.load(d)
    vals = values(main)
    vals = {n: vals[n] for n in kind.saved} if kind.saved else vals
    if kind.user_file:
        return picture(d), vals
    serial = fluid.io.get_latest_checkpoint_serial(d)
    return (serial, picture(os.path.join(d, f"checkpoint_{serial}"))), vals


def _fork_save(kind, d, main, seed):
    pid = os.fork()
    if pid == 0:  # the child: save changed values, never return into pytest
        code = 1
        try:
            _slow_down()
            set_values(main, seed)
            kind.save(d)
            code = 0
        finally:
            os._exit(code)
    return pid


@pytest.mark.parametrize("name", ["separate", "combined", "inference", "checkpoint"])
def test_kill_during_save_leaves_old_or_new(name, tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    main, startup, x, y, _ = adam_mlp()
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        kind = _dir_kinds(exe, main, x, y)[name]

        def prepare(d):
            os.makedirs(d)
            if kind.user_file:
                (open(os.path.join(d, "notes.txt"), "w")).write("the user's own file")
            set_values(main, OLD)
            kind.save(d)
            if not kind.user_file:
                kind.save(d)      # two old checkpoints: the new one retires the first
        # the two pictures a reader may find: the old save and the new one over it
        ref = str(tmp_path / "ref")
        prepare(ref)
        want_old = _state(kind, ref, main)
        set_values(main, NEW)
        kind.save(ref)
        want_new = _state(kind, ref, main)
        # how long an unkilled save takes in a child
        d = str(tmp_path / "timing")
        prepare(d)
        t0 = time.perf_counter()
        os.waitpid(_fork_save(kind, d, main, NEW), 0)
        duration = time.perf_counter() - t0
        assert _state(kind, d, main)[0] == want_new[0]

        rng = random.Random(f"{name}-kill")
        outcomes = []
        for trial in range(TRIALS):
            parent = tmp_path / f"t{trial}"
            d = str(parent / "m")
            prepare(d)
            pid = _fork_save(kind, d, main, NEW)
            time.sleep(rng.uniform(0, duration))
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            with fluid.scope_guard(fluid.Scope()):
                exe.run(startup)
                got = _state(kind, d, main)
            assert got[0] in (want_old[0], want_new[0]), f"trial {trial}: a mix of two saves"
            want = want_old if got[0] == want_old[0] else want_new
            assert same_values(got[1], want[1]), f"trial {trial}: loaded other values"
            outcomes.append("old" if want is want_old else "new")
            kind.save(d)  # the next save: nothing of the killed one left anywhere
            assert os.listdir(parent) == ["m"] and not hidden_entries(d), trial
        # the kill times covered the save: both outcomes were seen
        assert {"old", "new"} <= set(outcomes), outcomes

"""Checkpoints: Fluid 1.x's API and layout, the newest N kept, trainer args typed, and
training killed mid-run and resumed from its last checkpoint ending where an uninterrupted
run ends (the plain Executor, and AsyncExecutor resumed at its position in the file list)."""
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import fluidity as fluid
from fluidity.io import CheckpointError, ManifestError
from io_models import same_values, set_values, values

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "train_resumable.py")



def test_layout_serials_and_newest_kept(model, tmp_path):
    exe, main, startup, _ = model
    d = str(tmp_path / "ckpt")
    assert fluid.io.get_latest_checkpoint_serial(d) == -1
    saved = {}
    for step in range(5):
        set_values(main, step)
        saved[step] = values(main)
        assert fluid.io.save_checkpoint(exe, d, trainer_id=0, trainer_args={
            "epoch_id": step, "step_id": 10 * step, "files": ["a", "b"]},
            main_program=main, max_num_checkpoints=3) == step
    assert sorted(os.listdir(d)) == ["checkpoint_2", "checkpoint_3", "checkpoint_4"]
    assert fluid.io.get_latest_checkpoint_serial(d) == 4
    c4 = os.path.join(d, "checkpoint_4")
    model_files = os.listdir(os.path.join(c4, "__model__"))
    # parameters and all optimizer state: moments, beta powers, the lr decay counter
    for n in ["w1", "b2", "w1_moment1_0", "w1_beta2_pow_acc_0", "@LR_DECAY_COUNTER@",
              "_SUCCESS"]:
        assert n in model_files
    assert open(os.path.join(c4, "trainer_0", "step_id")).read() == "40"  # Fluid's files
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        args = fluid.io.load_checkpoint(exe, d, main_program=main)
        assert args == {"epoch_id": 4, "step_id": 40, "files": ["a", "b"]}
        assert same_values(values(main), saved[4])
        assert fluid.io.load_checkpoint(exe, d, serial=2, main_program=main)["epoch_id"] == 2
        assert same_values(values(main), saved[2])
    assert fluid.io.load_trainer_args(d, 3, 0, ["epoch_id", "step_id"]) == [3, 30]
    fluid.io.clean_checkpoint(d, delete_dir=True)
    assert not os.path.exists(d)


def test_bad_checkpoint_calls(model, tmp_path):
    exe, main, startup, _ = model
    d = str(tmp_path / "c")
    with pytest.raises(ValueError, match="'checkpoint_dir' should not be None"):
        fluid.io.save_checkpoint(exe, None, main_program=main)
    with pytest.raises(CheckpointError, match="trainer_args must be a dict"):
        fluid.io.save_checkpoint(exe, d, trainer_args=[1], main_program=main)
    with pytest.raises(CheckpointError, match="JSON-serializable"):
        fluid.io.save_checkpoint(exe, d, trainer_args={"x": object()}, main_program=main)
    with pytest.raises(CheckpointError, match=r"c: no complete checkpoint to load"):
        fluid.io.load_checkpoint(exe, d, main_program=main)
    assert not os.path.exists(os.path.join(d, "checkpoint_0"))
    fluid.io.save_checkpoint(exe, d, main_program=main)
    with pytest.raises(CheckpointError, match=r"checkpoint_7: no complete checkpoint with "
                                              r"serial 7 \(complete ones: \[0\]\)"):
        fluid.io.load_checkpoint(exe, d, serial=7, main_program=main)
    f = os.path.join(d, "checkpoint_0", "__model__", "w2")
    data = bytearray(open(f, "rb").read())
    data[-2] ^= 1
    open(f, "wb").write(bytes(data))
    with pytest.raises(ManifestError, match=r"checkpoint_0/__model__/w2: contents differ"):
        fluid.io.load_checkpoint(exe, d, main_program=main)


def test_incomplete_checkpoints_are_never_loaded(model, tmp_path):
    exe, main, startup, _ = model
    d = str(tmp_path / "c")
    set_values(main, 1)
    want = values(main)
    fluid.io.save_checkpoint(exe, d, trainer_args={"epoch_id": 1}, main_program=main)
    # Paddle's own kind of incomplete checkpoint (no _SUCCESS) and a killed staging dir
    os.makedirs(os.path.join(d, "checkpoint_5", "__model__"))
    os.makedirs(os.path.join(d, ".checkpoint_6.fluidity-staging-999999999-x", "__model__"))
    assert fluid.io.get_latest_checkpoint_serial(d) == 0
    assert not os.path.exists(os.path.join(d, ".checkpoint_6.fluidity-staging-999999999-x"))
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        assert fluid.io.load_checkpoint(exe, d, main_program=main) == {"epoch_id": 1}
        assert same_values(values(main), want)
    assert fluid.io.save_checkpoint(exe, d, main_program=main) == 6   # past every serial


def _run(args, env=None):
    return subprocess.Popen([sys.executable, SCRIPT, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", **(env or {})})


def _finish(p):
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err[-3000:]
    return out


def _kill_mid_run(args, after_lines, window_s):
    """Start the script; once it printed `after_lines` checkpoint lines, kill it -9 at a
    random moment within the next `window_s` seconds. Returns its output."""
    p = _run(args, {"FLUIDITY_TEST_EPOCH_SLEEP": str(window_s / 2)})
    lines = []
    while len(lines) < after_lines:
        line = p.stdout.readline()
        assert line, p.stderr.read()[-3000:]
        lines.append(line)
    time.sleep(random.Random(" ".join(args)).uniform(0, window_s))
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL, "the run ended before it was killed"
    return lines


def _same_npz(a, b):
    a, b = np.load(a), np.load(b)
    assert sorted(a.files) == sorted(b.files)
    for k in a.files:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("mode", ["executor", "async"])
def test_killed_training_resumes_to_the_same_parameters(mode, tmp_path):
    extra = []
    if mode == "async":
        from fluidity.datafeed.generate import generate_ctr
        generate_ctr(str(tmp_path / "data"), 480, files=6, seed=2, vocab=50,
                     sparse_slots=2, dense_slots=2)
        extra = [str(tmp_path / "data")]
    ref = _run([mode, str(tmp_path / "ref_ckpt"), str(tmp_path / "ref.npz"), *extra])
    lines = _kill_mid_run([mode, str(tmp_path / "ckpt"), str(tmp_path / "killed.npz"),
                           *extra], after_lines=2, window_s=0.6)
    assert not os.path.exists(tmp_path / "killed.npz")
    out = _finish(_run([mode, str(tmp_path / "ckpt"), str(tmp_path / "out.npz"), *extra]))
    assert out.startswith("resumed at"), out
    resumed_at = int(out.split("\n")[0].split()[-1])
    assert resumed_at >= len(lines), (lines, out)  # nothing checkpointed is lost
    _finish(ref)
    _same_npz(tmp_path / "out.npz", tmp_path / "ref.npz")

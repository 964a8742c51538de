"""The README as a user follows it: its Python example trains, every command it shows runs
as written and in order (after the demo, in the directory it wrote to: `model_run`, and
the C program compiled and linked against the library), the demo prints the README's own
commands, and it links only to files in the repository."""
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = open(os.path.join(ROOT, "README.md")).read()
# `make demo` / `make test` are the two runs themselves (tests/examples runs the demo's
# script as `make demo` does; the suite is this); `.venv/bin/X` is the venv `make` makes:
# here, the interpreter that runs the tests, with this checkout's package
SETUP = {"make demo", "make test"}
VENV = {".venv/bin/fluidity": [sys.executable, "-m", "fluidity.cli"],
        ".venv/bin/python": [sys.executable]}
QUIET = {"cc"}          # a compiler says nothing when it works


def test_readme_example_runs():
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    code += "\nassert float(l) < 1.0, l\nprint('ok')\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


def readme_commands():
    """Each command line of the README's sh blocks, without its comment."""
    cmds = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        for line in block.splitlines():
            cmd = shlex.split(line, comments=True)
            if cmd and " ".join(cmd) not in SETUP:
                cmds.append(cmd)
    return cmds


@pytest.fixture(scope="module")
def after_demo(tmp_path_factory):
    """A directory where a (small) demo ran, as the README's commands expect, with the C
    program saved as the README says; and what the demo printed."""
    d = tmp_path_factory.mktemp("readme")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py"),
                        "--lines", "3000", "--test-lines", "1000", "--files", "2",
                        "--epochs", "1", "--workers", "2", "--data-dir", "data/ctr",
                        "--out-dir", "out"],
                       cwd=d, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    os.symlink(os.path.join(ROOT, "examples"), d / "examples")   # as from the checkout
    (d / "predict.c").write_text(c_program())
    return d, r.stdout


def c_program():
    blocks = re.findall(r"```c\n(.*?)```", README, re.S)
    assert len(blocks) == 1 and "saved as `predict.c`" in README
    return blocks[0]


def test_the_readme_shows_commands():
    progs = {c[0] for c in readme_commands()}
    assert ".venv/bin/fluidity" in progs and len(readme_commands()) >= 5
    assert "build/ctr/model_run" in progs and "cc" in progs and "./predict" in progs


def test_every_readme_command_runs_as_written(after_demo):
    """In the README's order, as a user types them: compile before model_run, cc before
    ./predict."""
    d, _ = after_demo
    for cmd in readme_commands():
        argv = VENV.get(cmd[0], [cmd[0]]) + cmd[1:]
        r = subprocess.run(argv, cwd=d, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (cmd, r.stderr[-2000:])
        assert r.stdout.strip() or cmd[0] in QUIET, cmd
        for arg in cmd[1:]:      # what a command says it writes, it writes
            if arg.startswith(("out/ctr_pred", "out/ctr_run", "build/")):
                assert os.path.exists(os.path.join(d, arg)), arg
        if cmd[0] == "./predict":
            assert re.fullmatch(r"save_infer_model/scale_0: P\(click\) = 0\.\d{4}\n", r.stdout)
        if cmd[0] == "build/ctr/model_run":
            import numpy as np
            pred = np.load(os.path.join(d, "out", "ctr_pred.npz"))["save_infer_model/scale_0"]
            run = np.load(os.path.join(d, "out", "ctr_run", "save_infer_model_scale_0.npy"))
            np.testing.assert_allclose(run, pred, rtol=1e-5, atol=1e-6)


def test_the_demo_prints_the_readme_commands(after_demo):
    """The follow-up commands the demo prints are the README's (the executable's path is
    where this Python's venv is)."""
    _, out = after_demo
    lines = out.splitlines()
    printed = [shlex.split(ln) for ln in lines if ln.startswith("  ") and
               ("fluidity" in ln or "model_run" in ln)]
    assert len(printed) == 3, out
    readme = [c[1:] for c in readme_commands()]
    for cmd in printed:
        assert cmd[1:] in readme, (cmd, readme)
    assert "tensorboard --logdir out/tensorboard" in README
    assert "  tensorboard --logdir out/tensorboard" in lines


def test_readme_links_only_to_files_in_the_repository():
    links = re.findall(r"\]\(([^)]+)\)", README)
    assert "docs/architecture.md" in links
    for target in links:
        if target.startswith("#"):      # a section of the README itself (GitHub's slugs)
            slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                     for h in re.findall(r"^#+ (.*)$", README, re.M)}
            assert target[1:] in slugs, target
            continue
        assert "://" not in target and not os.path.isabs(target), target
        path = os.path.normpath(os.path.join(ROOT, target.split("#")[0]))
        assert path.startswith(ROOT + os.sep) and os.path.exists(path), target

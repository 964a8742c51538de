"""The README as a user follows it: its Python example trains, every command it shows runs
as written (after the demo, in the directory it wrote to), and it links only to files in
the repository."""
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
    """A directory where a (small) demo ran, as the README's commands expect."""
    d = tmp_path_factory.mktemp("readme")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "demo.py"),
                        "--lines", "3000", "--test-lines", "1000", "--files", "2",
                        "--epochs", "1", "--workers", "2", "--data-dir", "data/ctr",
                        "--out-dir", "out"],
                       cwd=d, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    os.symlink(os.path.join(ROOT, "examples"), d / "examples")   # as from the checkout
    return d


def test_the_readme_shows_commands():
    progs = {c[0] for c in readme_commands()}
    assert ".venv/bin/fluidity" in progs and len(readme_commands()) >= 5


@pytest.mark.parametrize("cmd", readme_commands(), ids=lambda c: " ".join(c[1:3]))
def test_every_readme_command_runs_as_written(cmd, after_demo):
    argv = VENV.get(cmd[0], [cmd[0]]) + cmd[1:]
    r = subprocess.run(argv, cwd=after_demo, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (cmd, r.stderr[-2000:])
    assert r.stdout.strip(), cmd
    for arg in cmd[1:]:      # what a command says it writes, it writes
        if arg.startswith(("out/ctr_pred", "build/")):
            assert os.path.exists(os.path.join(after_demo, arg)), arg


def test_readme_links_only_to_files_in_the_repository():
    links = re.findall(r"\]\(([^)]+)\)", README)
    assert "docs/architecture.md" in links
    for target in links:
        assert "://" not in target and not os.path.isabs(target), target
        path = os.path.normpath(os.path.join(ROOT, target.split("#")[0]))
        assert path.startswith(ROOT + os.sep) and os.path.exists(path), target

"""scripts/conformance/run.py's --python: a test file runs under the interpreter given (its
own numpy), and a path that is no interpreter is refused before anything runs."""
import importlib.util
import os
import sys

import pytest

from tests.paths import ROOT

HERE = os.path.join(ROOT, "scripts", "conformance")


def _run_module():
    spec = importlib.util.spec_from_file_location("conformance_run", os.path.join(HERE, "run.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_test_file_runs_under_the_interpreter_given(tmp_path):
    run = _run_module()
    (tmp_path / "test_which.py").write_text(
        "import sys, unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_interpreter(self):\n"
        f"        self.assertEqual(sys.executable, {sys.executable!r})\n")
    got = run.run_one(str(tmp_path / "test_which.py"), os.path.join(HERE, "shim"), 120,
                      python=sys.executable)
    assert got["status"] == "pass", got


def test_a_python_that_is_no_interpreter_is_refused(tmp_path, capsys):
    run = _run_module()
    with pytest.raises(SystemExit):
        run.main(["--paddle-git", str(tmp_path), "--python", str(tmp_path / "nope")])
    assert "--python" in capsys.readouterr().err

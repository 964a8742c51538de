"""Small things a user trips on: explain() counting feed and fetch apart from Python steps,
the examples' --help, api_coverage.py without protobuf."""
import os
import re
import subprocess
import sys

import pytest
from paths import ROOT

import fluidity as fluid

EXAMPLES = sorted(f for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".py"))


def test_explain_counts_feed_and_fetch_apart():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.relu(fluid.layers.fc(x, 3))
    exe = fluid.Executor()
    exe.run(start)
    compiled = fluid.CompiledProgram(main).with_native_code(feed=["x"], fetch_list=[y])
    text = compiled.explain()
    head = text.splitlines()[0]
    assert re.fullmatch(r"\d+ ops: \d+ in 1 native segment\(s\), 0 as Python steps, "
                        r"2 feed/fetch \(the run's own input and output\)", head), head
    assert sum(" feed/fetch " in ln for ln in text.splitlines()[1:]) == 2


@pytest.mark.parametrize("script", EXAMPLES)
def test_every_example_option_has_help_and_its_default(script):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", script), "--help"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    options = re.findall(r"^  (--[a-z-]+)", r.stdout, re.M)
    assert options, r.stdout
    assert r.stdout.count("(default:") == len(options), r.stdout


def test_api_coverage_without_protobuf_fails_naming_it():
    """A Python whose protobuf is missing: the script says it cannot import fluidity and
    why, exit 1, rather than reporting 630 of 633 names missing."""
    blocker = ("import sys, runpy\n"
               "class NoProtobuf:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name == 'google.protobuf' or name.startswith('google.protobuf.'):\n"
               "            raise ImportError(f'No module named {name!r}')\n"
               "sys.meta_path.insert(0, NoProtobuf())\n"
               f"sys.argv = ['api_coverage.py']\n"
               f"runpy.run_path({os.path.join(ROOT, 'scripts', 'api_coverage.py')!r}, "
               f"run_name='__main__')\n")
    r = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "api_coverage: cannot import fluidity" in r.stderr and "google.protobuf" in r.stderr
    assert "missing" not in r.stdout

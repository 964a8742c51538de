"""scripts/api_coverage.py: its parsing, its classification and its arithmetic on a tiny
list whose answers are known, and a run over the real list (no threshold asserted: the
figures are for docs/api.md, not a gate)."""
import importlib.util
import os
import subprocess
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "api_coverage.py")


@pytest.fixture(scope="module")
def cov():
    spec = importlib.util.spec_from_file_location("api_coverage", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TINY = """
# a comment
@paddle.fluid.layers
good(input, size, name)
renamed(x, y)
extra_required(x)
gone(x)
declined(x)
declined_by_marker(x)
Thing[class](a, b)
Thing.run(feed, *more, **kw)
prior_box(input, image)
@paddle.fluid.dygraph
guard(place)
"""


def _fake_module(cov):
    from fluidity.errors import declined as declined_helper
    m = types.SimpleNamespace()

    def good(input, size, name=None, extra=1):
        return input

    def renamed(a, y):
        return a

    def extra_required(x, must):
        return x

    def declined(x):
        """Not built."""
        raise NotImplementedError("declined on purpose")

    class Thing:
        def __init__(self, a, b, c=0):
            self.a = a

        def run(self, feed, *more, **kw):
            return feed

    m.good, m.renamed, m.extra_required, m.declined, m.Thing = (good, renamed, extra_required,
                                                              declined, Thing)
    m.declined_by_marker = declined_helper("layers.declined_by_marker", "a test's reason")
    m.prior_box = good
    return m


def test_tiny_list_arithmetic(cov):
    entries = cov.parse(TINY)
    assert [e.name.rsplit(".", 1)[1] for e in entries][:3] == ["good", "renamed",
                                                                "extra_required"]
    thing_run = [e for e in entries if e.name.endswith("Thing.run")][0]
    assert thing_run.args == ["feed"] and thing_run.varargs == "more" and thing_run.varkw == "kw"
    fake = _fake_module(cov)

    def resolver(dotted):
        assert dotted.startswith("fluidity.layers.")
        obj = fake
        for p in dotted[len("fluidity.layers."):].split("."):
            obj = getattr(obj, p, cov._MISSING)
            if obj is cov._MISSING:
                break
        return obj

    table = cov.coverage(entries, resolver)
    assert list(table) == ["paddle.fluid.layers"]       # dygraph excluded, not counted
    row = table["paddle.fluid.layers"]
    # prior_box, a detection layer, is counted like the rest (its stand-in takes other
    # arguments: args)
    assert (row["total"], row["ok"], row["declined"], row["args"], row["missing"]) == \
        (9, 3, 2, 3, 1)
    details = dict(row["names"]["args"])
    assert "argument 1 is 'a'" in details["paddle.fluid.layers.renamed"]
    assert "'must' has no default" in details["paddle.fluid.layers.extra_required"]
    assert cov.totals(table)["total"] == 9
    text = cov.format_table(table)
    assert "paddle.fluid.layers" in text and text.splitlines()[-1].split()[1:] == \
        ["9", "3", "2", "3", "1"]


def test_name_mapping_and_exclusions(cov):
    assert cov.fluidity_name("paddle.fluid.layers.fc") == "fluidity.layers.fc"
    assert cov.fluidity_name("paddle.reader.shuffle") == "fluidity.reader.shuffle"
    assert cov.fluidity_name("paddle.batch") == "fluidity.batch"
    e = cov.parse("@paddle.fluid.optimizer\nSGDOptimizer.state_dict()\n")[0]
    assert cov.excluded(e) == "dygraph-only method"


def test_declined_helper_raises_and_names_the_reason():
    from fluidity.errors import declined
    f = declined("transpiler.Thing", "distributed training is not built yet")
    with pytest.raises(NotImplementedError, match="distributed training is not built yet"):
        f(1, 2)


def test_runs_on_the_real_list():
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, SCRIPT, "--missing"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    last = [ln for ln in out.stdout.splitlines() if ln.startswith("all ")][0].split()
    total, ok, dec, args, missing = map(int, last[1:])
    assert total == ok + dec + args + missing and total > 500
    assert "paddle.fluid.layers" in out.stdout

"""How much of each book chapter's and example's programs compiles: per model, its training
and inference programs' native segments and the ops that cut them (run as Python steps).

The book chapters (tests/fluid_book) build their programs inline, as Fluid users wrote them,
so this runs those tests in-process with `Executor.run` wrapped: every distinct program a
test runs with a feed (its training step, its test clone, the inference program it loads
back) is recorded with its first feed, fetch names and scope. The examples' programs come
from their `build_*` functions. Each program is then lowered exactly as
`CompiledProgram(program).with_native_code(feed, fetch).explain()` lowers it.

    PYTHONPATH=. .venv/bin/python scripts/compile_coverage.py            # the table
    PYTHONPATH=. .venv/bin/python scripts/compile_coverage.py -v   # and why each op cuts
    PYTHONPATH=. .venv/bin/python scripts/compile_coverage.py --time understand_sentiment

`--time SUBSTRING` also times the training step (median `exe.run` of the recorded feed,
interpreted and compiled) of every book model whose name contains SUBSTRING.
"""
import argparse
import collections
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK = os.path.join(ROOT, "tests", "fluid_book")
EXAMPLES = os.path.join(ROOT, "examples")
NOT_CUTTERS = {"feed", "fetch"}


class Recorded:
    """One program a model runs: its kind ('train' when it has gradient ops, else 'infer'),
    the program, a feed it ran with, its fetch names and the scope it ran in."""

    def __init__(self, model, kind, program, feed, fetch, scope):
        self.model, self.kind, self.program = model, kind, program
        self.feed, self.fetch, self.scope = feed, fetch, scope


def _kind(program):
    types = [op.type for op in program.global_block().ops]
    return "train" if any(t.endswith(("_grad", "_grad2")) for t in types) else "infer"


def _names(fetch_list):
    return [v if isinstance(v, str) else v.name for v in (fetch_list or [])]


class BookRecorder:
    """A pytest plugin: wraps Executor.run while the book tests run and keeps each distinct
    (by its op types) program a test runs with a feed."""

    def __init__(self):
        self.runs, self._seen, self._test = [], set(), None

    def pytest_runtest_setup(self, item):
        self._test = item.name.replace("test_", "", 1)

    def pytest_sessionstart(self, session):
        from fluidity.executor.executor import Executor
        self._orig = orig = Executor.run
        rec = self

        def run(exe, program=None, feed=None, fetch_list=None, *args, **kw):
            rec.record(program, feed, fetch_list, kw.get("scope"))
            return orig(exe, program, feed, fetch_list, *args, **kw)
        Executor.run = run

    def pytest_sessionfinish(self, session):
        from fluidity.executor.executor import Executor
        Executor.run = self._orig

    def record(self, program, feed, fetch_list, scope):
        import fluidity as fluid
        if not feed or program is None or self._test is None:
            return
        if hasattr(program, "program_for_executor"):
            program = program.program_for_executor()
        key = (self._test, tuple(op.type for op in program.global_block().ops))
        if key in self._seen:
            return
        self._seen.add(key)
        self.runs.append(Recorded(self._test, _kind(program), program, dict(feed),
                                  _names(fetch_list), scope or fluid.global_scope()))


def book_programs(select=None):
    """Run the book tests (all, or those whose name contains `select`) and return what they
    ran."""
    import pytest
    rec = BookRecorder()
    args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", BOOK]
    if select:
        args += ["-k", select]
    rc = pytest.main(args, plugins=[rec])
    if rc not in (0, 5):
        raise SystemExit(f"the book tests failed (pytest exit {rc}); coverage needs them")
    return rec.runs


def example_programs():
    """The examples' training and test programs, from their builders."""
    import fluidity as fluid
    sys.path.insert(0, EXAMPLES)
    from ctr_dnn import build_ctr_dnn
    from digits import build, cnn, mlp
    from sentiment_lstm import build_model
    from seq2seq import CellSeq2Seq, build_decode, build_train
    from textcls import build_textcls
    from word2vec import build_word2vec
    out = []

    def add(model, main, test, fetch, test_fetch=None):
        for prog, f in ((main, fetch), (test, test_fetch or fetch)):
            if prog is not None:
                out.append(Recorded(model, _kind(prog), prog, None, _names(f), None))

    with fluid.unique_name.guard():
        for name, net in (("mlp", mlp), ("cnn", cnn)):
            main, _, test, loss, acc = build(net)
            add(f"examples/digits {name}", main, test, [loss, acc])
        main, _, test, v = build_ctr_dnn([f"s{k}" for k in range(26)], with_auc=True)
        add("examples/ctr_dnn", main, test, [v["loss"]])
        main, _, test, loss, acc = build_model(3000)
        add("examples/sentiment_lstm", main, test, [loss, acc])
        main, _, loss = build_train()
        dec, tokens = build_decode()
        add("examples/seq2seq --api lod", main, dec, [loss], [tokens])
        cells = CellSeq2Seq()                  # the example's default API
        main, _, loss = cells.build_train()
        add("examples/seq2seq --api cell", main, None, [loss])
        for beam in (None, 4):
            dec, ids = cells.build_decode(beam_size=beam)
            name = "greedy" if beam is None else f"beam {beam}"
            add(f"examples/seq2seq --api cell, {name}", dec, None, [ids])
        main, _, test, v = build_textcls(3000)
        add("examples/textcls", main, test, [v["loss"]])
        main, _, test, v = build_word2vec(3000)
        add("examples/word2vec", main, test, [v["loss"]])
    return out


def lower(rec):
    """(explain rows, native segment count, {cutting op type: reason}) of a program as the
    native plan lowers it for its feed and fetch names."""
    from fluidity.codegen.explain import explain_rows
    from fluidity.executor.executor import add_feed_fetch_ops
    view = add_feed_fetch_ops(rec.program, 0, list(rec.feed or []), rec.fetch)
    rows = explain_rows(view, 0, keep=rec.fetch)
    segs = len({w for _, _, w, _ in rows if w != "python"})
    cutters = collections.OrderedDict()
    for _, t, w, why in rows:
        if w == "python" and t not in NOT_CUTTERS:
            cutters.setdefault(t, why)
    return rows, segs, cutters


def report(runs, verbose=False):
    from fluidity.codegen import emit
    from fluidity.codegen.segment import LOWER_BLOCKS     # control flow: loops, branches
    print(f"{'model':44s} {'prog':5s} {'ops':>4s} {'segs':>4s} {'py':>4s}  ops that cut "
          f"(* has an emitter but not for this use)")
    totals = collections.Counter()
    for rec in runs:
        rows, segs, cutters = lower(rec)
        py = sum(1 for _, t, w, _ in rows if w == "python" and t not in NOT_CUTTERS)
        n = sum(1 for _, t, _, _ in rows if t not in NOT_CUTTERS)
        names = []
        for t in cutters:
            compiles = emit.lookup(t, "cpu") is not None or t in LOWER_BLOCKS
            names.append(t + ("*" if compiles else ""))
            totals[t] += 1
        print(f"{rec.model:44s} {rec.kind:5s} {n:4d} {segs:4d} {py:4d}  {' '.join(names)}")
        if verbose:
            for t, why in cutters.items():
                print(f"{'':56s}{t}: {why}")
    print("\nops by the number of programs they cut:")
    for t, c in totals.most_common():
        print(f"  {c:3d}  {t}")


def _median_step(exe, prog, rec, steps):
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        exe.run(prog, feed=rec.feed, fetch_list=rec.fetch, scope=rec.scope)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def time_training(runs, steps):
    """Median step time of each recorded training program, interpreted and compiled (the
    compiled one after a warm-up run that builds its library)."""
    import fluidity as fluid
    exe = fluid.Executor(fluid.CPUPlace())
    for rec in runs:
        if rec.kind != "train" or rec.feed is None:
            continue
        compiled = fluid.CompiledProgram(rec.program).with_native_code(
            feed=list(rec.feed), fetch_list=rec.fetch)
        for prog in (rec.program, compiled):
            exe.run(prog, feed=rec.feed, fetch_list=rec.fetch, scope=rec.scope)
        t_py = _median_step(exe, rec.program, rec, steps)
        t_c = _median_step(exe, compiled, rec, steps)
        print(f"{rec.model}: training step interpreted {t_py * 1e3:.2f} ms, compiled "
              f"{t_c * 1e3:.2f} ms ({t_py / t_c:.2f}x), median of {steps}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-k", dest="select", help="only the book tests whose name contains this")
    p.add_argument("--no-examples", action="store_true", help="the book chapters only")
    p.add_argument("-v", "--verbose", action="store_true", help="why each cutting op cuts")
    p.add_argument("--time", metavar="SUBSTRING",
                   help="time the training steps of the book models whose name has this")
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args(argv)
    runs = book_programs(args.time or args.select)
    if not args.no_examples and not args.time and not args.select:
        runs += example_programs()
    report(runs, args.verbose)
    if args.time:
        time_training([r for r in runs if args.time in r.model], args.steps)


if __name__ == "__main__":
    main()

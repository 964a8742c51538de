"""Run Paddle 1.8's own unit tests and book chapters against Fluidity, unchanged but for the
import of `paddle` (the shim under scripts/conformance/shim: `paddle.fluid` is Fluidity,
`paddle.dataset` synthetic data of the same shapes), and write the table of results.

    python scripts/conformance/run.py --paddle-git PATH/TO/Paddle/.git [--commit 89c76a53]
        [--only REGEX] [--jobs 2] [--timeout 300] [--out docs/conformance.md] [--json F]
        [--python PATH]

Paddle's files are taken from its git history into a temporary directory for the run and
deleted after it: nothing of Paddle's is kept or committed, only the results. The tests need
`six` (Paddle 1.8's tests import it): `pip install six` into the environment first.

Each in-scope test file (scope.py says which are out, and why) runs in its own process under
pytest with a time limit; a file passes when pytest reports no failure and at least one test
ran (a file whose every test is skipped, e.g. CUDA-only classes, is reported as skipped).

`--python PATH` runs the test files under another interpreter (its own numpy, e.g. the
numpy 1.26 venv that `make test-numpy1` builds: Paddle 1.8's tests were written for
numpy 1.x); Fluidity is imported from this checkout either way.
"""
import argparse
import concurrent.futures as futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import io

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from scope import classify  # noqa: E402

TREES = ("python/paddle/fluid/tests/unittests", "python/paddle/fluid/tests/book")


def extract(git_dir, commit, dest):
    """Paddle's test trees at `commit` under `dest` (git archive, no work tree needed)."""
    tar = subprocess.run(["git", "--git-dir", git_dir, "archive", commit, *TREES],
                         check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(dest, filter="data")
    return [os.path.join(dest, t) for t in TREES]


_SUMMARY = re.compile(r"\b\d+ (passed|failed|skipped|errors?|warnings?|deselected|xfailed|"
                      r"xpassed)\b.* in [\d.]+s")


def summary_of(out):
    """(passed, failed, skipped, errors) from pytest's summary line: the last line that is
    one (a test may print after it, e.g. gc.set_debug's report at exit)."""
    counts = {k: 0 for k in ("passed", "failed", "skipped", "error", "errors")}
    tail = next((line for line in reversed(out.strip().splitlines())
                 if _SUMMARY.search(line)), "")
    for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", tail):
        counts[k] += int(n)
    return counts["passed"], counts["failed"], counts["skipped"], \
        counts["error"] + counts["errors"]


def first_error(out):
    """The first assertion or exception line pytest printed, for the table.

    A test's own failure comes first: pytest prints errors in setup and teardown (the ERRORS
    section) before the FAILURES section, and Paddle's OpTest.tearDownClass raises its own
    "op_type in class attrs" assertion whenever a test failed before it set op_type, which
    would hide why it failed."""
    failures = out.find("= FAILURES =")
    for text in ((out[failures:],) if failures >= 0 else ()) + (out,):
        for pat in (r"^E\s+(\w*(Error|Exception|Met|Failed)\b.*)$", r"^E\s+(.+)$",
                    r"^(\w+Error: .+)$"):
            m = re.search(pat, text, re.M)
            if m:
                return m.group(1).strip()[:200]
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


def _kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if p.returncode is None:
        p.communicate()


def run_one(path, shim, timeout, python=sys.executable):
    cwd = os.path.dirname(path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([shim, cwd, ROOT]),
               OPENBLAS_NUM_THREADS="1", CPU_NUM="1")
    # only unittest.TestCase classes are tests, as in Paddle's CI (its test_runner.py loads
    # them with unittest): a module-level `def test_main(use_cuda, ...)` helper is not one
    cmd = [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
           "-p", "unittest_order", "-o", "python_functions=", "-o", "python_classes=",
           "--no-header", "-rN", os.path.basename(path)]
    t0 = time.monotonic()
    # its own process group: a test that forks servers or trainers leaves none behind, on a
    # timeout (the whole group is killed) or after it ends
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        _kill_group(p)
        return {"status": "fail", "reason": f"timed out after {timeout} s",
                "seconds": round(time.monotonic() - t0, 1)}
    finally:
        _kill_group(p)
    passed, failed, skipped, errors = summary_of(out)
    seconds = round(time.monotonic() - t0, 1)
    if rc == 0 and passed:
        return {"status": "pass", "reason": f"{passed} passed" +
                (f", {skipped} skipped" if skipped else ""), "seconds": seconds}
    if rc == 0 or (rc == 5 and not failed and not errors):
        return {"status": "skipped", "reason": "every test skipped (CUDA-only) or none "
                "collected", "seconds": seconds}
    return {"status": "fail", "reason": first_error(out), "seconds": seconds}


def collect(trees, only):
    files = []
    for tree in trees:
        for name in sorted(os.listdir(tree)):
            if name.startswith("test_") and name.endswith(".py"):
                if only and not re.search(only, name):
                    continue
                files.append(os.path.join(tree, name))
    return files


def write_table(results, out, commit):
    rows = sorted(results.items())
    counted = [r for _, r in rows if r["status"] in ("pass", "fail")]
    passed = sum(r["status"] == "pass" for r in counted)
    scope = {}
    for _, r in rows:
        if r["status"] == "out":
            scope[r["category"]] = scope.get(r["category"], 0) + 1
    lines = [
        "# Conformance: Paddle 1.8's own tests run against Fluidity",
        "",
        "Paddle's `python/paddle/fluid/tests/unittests` and `tests/book` at the 1.8 branch "
        f"point ({commit}), each file run unchanged apart from the import of `paddle` "
        "(`scripts/conformance/shim`: `paddle.fluid` is Fluidity, `paddle.dataset` synthetic "
        "data of the same shapes, as nothing can be downloaded). Command:",
        "",
        "    .venv/bin/pip install six",
        "    .venv/bin/python scripts/conformance/run.py --paddle-git PATH/TO/Paddle/.git",
        "",
        f"**{passed} of {len(counted)} in-scope test files pass "
        f"({100.0 * passed / max(len(counted), 1):.1f}%).**",
        "",
        "Out of scope (`scripts/conformance/scope.py` decides from the file's name and text):",
        "",
    ]
    for cat, n in sorted(scope.items()):
        why = next(r["reason"] for _, r in rows if r.get("category") == cat)
        lines.append(f"- {cat}: {n} files ({why})")
    skipped = sum(r["status"] == "skipped" for _, r in rows)
    lines += [f"- skipped when run: {skipped} files (every test skipped without CUDA)", "",
              "| test file | result | reason |", "|---|---|---|"]
    for name, r in rows:
        if r["status"] in ("pass", "fail", "skipped"):
            reason = r["reason"].replace("|", "\\|")
            lines.append(f"| {name} | {r['status']} | {reason} |")
    lines += ["", "Out-of-scope files:", ""]
    for name, r in rows:
        if r["status"] == "out":
            lines.append(f"- {name}: {r['category']}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return passed, len(counted)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paddle-git", required=True, help="a Paddle repository's .git dir")
    ap.add_argument("--commit", default="89c76a53", help="the 1.8 branch point")
    ap.add_argument("--only", help="run only test files whose name matches this regex")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=300, help="seconds per test file")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "conformance.md"))
    ap.add_argument("--json", help="also write the results as JSON here")
    ap.add_argument("--keep", help="extract into this directory and keep it (debugging)")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter that runs the tests (default: this one), e.g. "
                         ".venv-np1/bin/python for numpy 1.26")
    args = ap.parse_args(argv)
    if not (os.path.isfile(args.python) and os.access(args.python, os.X_OK)):
        ap.error(f"--python {args.python!r} is not an executable file")
    # absolute (each test runs in its own directory), but not resolved: a venv's python is a
    # symlink whose own path is what selects the venv
    args.python = os.path.abspath(args.python)
    work = args.keep or tempfile.mkdtemp(prefix="fluidity-conformance-")
    try:
        trees = extract(args.paddle_git, args.commit, work)
        shim = os.path.join(HERE, "shim")
        results, todo = {}, []
        for path in collect(trees, args.only):
            label = os.path.relpath(path, os.path.join(work, "python/paddle/fluid/tests"))
            with open(path, errors="replace") as f:
                out = classify(os.path.basename(path), f.read())
            if out is not None:
                results[label] = {"status": "out", "category": out[0], "reason": out[1]}
            else:
                todo.append((label, path))
        with futures.ThreadPoolExecutor(args.jobs) as pool:
            jobs = {pool.submit(run_one, path, shim, args.timeout, args.python): label
                    for label, path in todo}
            for n, job in enumerate(futures.as_completed(jobs), 1):
                label = jobs[job]
                results[label] = job.result()
                r = results[label]
                print(f"[{n}/{len(todo)}] {label}: {r['status']} ({r['seconds']} s) "
                      f"{r['reason'] if r['status'] != 'pass' else ''}", flush=True)
        passed, counted = write_table(results, args.out, args.commit)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1, sort_keys=True)
        print(f"{passed} of {counted} in-scope files pass; table in {args.out}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

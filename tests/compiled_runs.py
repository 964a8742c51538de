"""One program trained interpreted and compiled from the same start: the harness the
codegen tests share to compare the two paths."""
import logging
from collections import namedtuple

import numpy as np

import fluidity as fluid

Run = namedtuple("Run", "outs params")     # the fetches of each step; parameters after


def train(main, startup, fetch, feeds, compiled, return_numpy=True):
    """A fresh scope after `startup`, then one exe.run of `main` (through native code when
    `compiled`) per feed. Returns a Run: each step's fetches, and every parameter's value
    after the last step."""
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    prog = fluid.CompiledProgram(main).with_native_code() if compiled else main
    outs = [exe.run(prog, feed=feed, fetch_list=fetch, scope=scope,
                    return_numpy=return_numpy) for feed in feeds]
    if return_numpy:
        outs = [[np.array(v) for v in out] for out in outs]
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.all_parameters()}
    return Run(outs, params)


def train_both(main, startup, fetch, feeds, caplog=None, return_numpy=True):
    """(interpreted, compiled) Runs of `train`. Given pytest's caplog, also asserts that no
    op of the compiled run fell back to the interpreter."""
    want = train(main, startup, fetch, feeds, False, return_numpy)
    if caplog is None:
        return want, train(main, startup, fetch, feeds, True, return_numpy)
    with caplog.at_level(logging.WARNING):
        got = train(main, startup, fetch, feeds, True, return_numpy)
    assert "run interpreted" not in caplog.text
    return want, got


def step_both(main, startup, fetch, feed, caplog=None, return_numpy=True):
    """(interpreted, compiled) fetches of one step of `train_both`."""
    want, got = train_both(main, startup, fetch, [feed], caplog, return_numpy)
    return want.outs[0], got.outs[0]


def central_differences(f, x, eps):
    """(f(x + e) - f(x - e)) / 2e for each element of x: f takes an array like x and
    returns a float."""
    x = np.asarray(x)
    out = np.zeros_like(x)
    for j in range(x.size):
        f2 = []
        for sign in (1, -1):
            p = x.copy()
            p.flat[j] += sign * eps
            f2.append(f(p))
        out.flat[j] = (f2[0] - f2[1]) / (2 * eps)
    return out


def param_differences(scope, name, loss, eps):
    """central_differences of loss() over the values of parameter `name` in `scope`,
    which are put back afterwards."""
    value = scope.find_var(name).value
    base = np.array(value._array)

    def f(p):
        value._array = p
        return loss()
    try:
        return central_differences(f, base, eps)
    finally:
        value._array = base

"""Small models and helpers shared by the save/load tests of tests/io: a model with
parameters and Adam state, values set from a seed, and a byte-for-byte picture of a
directory."""
import os

import numpy as np

import fluidity as fluid


def adam_mlp():
    """(main, startup, x, y, loss): x[4] -> fc 8 relu -> fc 3, squared error to label[3],
    Adam with an exponentially decayed learning rate (moments, beta powers, lr counter)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [4])
        label = fluid.layers.data("label", [3])
        h = fluid.layers.fc(x, 8, act="relu", param_attr=fluid.ParamAttr(name="w1"),
                            bias_attr=fluid.ParamAttr(name="b1"))
        y = fluid.layers.fc(h, 3, param_attr=fluid.ParamAttr(name="w2"),
                            bias_attr=fluid.ParamAttr(name="b2"))
        loss = fluid.layers.mean(fluid.layers.square_error_cost(y, label))
        lr = fluid.layers.exponential_decay(0.05, decay_steps=3, decay_rate=0.9)
        fluid.optimizer.Adam(lr).minimize(loss)
    return main, startup, x, y, loss


def persistable_names(program):
    return sorted(v.name for v in program.list_vars() if fluid.io.is_persistable(v))


def set_values(program, seed, scope=None):
    """Every persistable of `program` set to values drawn from `seed` (shapes as in scope)."""
    scope = scope or fluid.global_scope()
    rng = np.random.default_rng(seed)
    for n in persistable_names(program):
        t = scope.find_var(n).get_tensor()
        old = np.array(t)
        t.set(rng.normal(size=old.shape).astype(old.dtype))


def values(program, scope=None):
    scope = scope or fluid.global_scope()
    return {n: np.array(scope.find_var(n).get_tensor()) for n in persistable_names(program)}


def same_values(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def picture(d):
    """{relative path: bytes} of every file below `d`."""
    out = {}
    for root, _dirs, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, d)] = open(p, "rb").read()
    return out


def hidden_entries(d):
    """Paths below (and in) `d` whose name starts with a dot: leftovers of a save."""
    out = []
    for root, dirs, files in os.walk(d):
        out += [os.path.join(root, n) for n in dirs + files if n.startswith(".")]
    return out

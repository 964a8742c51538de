"""`fluid.install_check.run_check()`: is this Fluidity able to build and train a program?

It builds a tiny linear model in its own programs and scope, trains it a few steps with
SGD, once on the Executor and once data parallel on two CPU places
(`CompiledProgram.with_data_parallel`, as Fluid's check does),
checks that the loss fell both times, and prints that it works (Fluid's success message, for Fluidity). A failure
raises the error met (nothing is printed as success then).
"""
import numpy as np

from . import layers, optimizer, unique_name
from .compiler import CompiledProgram
from .core.place import CPUPlace
from .core.scope import Scope, scope_guard
from .executor import Executor
from .framework import Program, program_guard


def _train(exe, startup, program, loss, feed, steps=5):
    exe.run(startup)
    first = last = None
    for _ in range(steps):
        (value,) = exe.run(program, feed=feed, fetch_list=[loss])
        value = float(np.mean(value))
        first = value if first is None else first
        last = value
    if not np.isfinite(last) or last >= first:
        raise RuntimeError(f"install check: the loss did not fall ({first} -> {last})")
    return first, last


def run_check():
    main, startup = Program(), Program()
    main.random_seed = startup.random_seed = 1
    with unique_name.guard(), program_guard(main, startup):
        x = layers.data("install_check_x", [2])
        y = layers.data("install_check_y", [1])
        pred = layers.fc(x, 1)
        loss = layers.mean(layers.square_error_cost(pred, y))
        optimizer.SGD(learning_rate=0.05).minimize(loss, startup)
    rng = np.random.RandomState(0)
    xs = rng.rand(16, 2).astype("float32")
    feed = {"install_check_x": xs,
            "install_check_y": (xs @ np.array([[2.0], [-1.0]], "float32") + 0.5)}
    exe = Executor(CPUPlace())
    with scope_guard(Scope()):
        _train(exe, startup, main, loss, feed)
    with scope_guard(Scope()):
        _train(exe, startup, CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, places=[CPUPlace(), CPUPlace()]), loss, feed)
    print("Running Verify Fluid Program ... ")
    print("Your Fluidity works well on CPU, on the Executor and data parallel.")
    print("Your Fluidity is installed successfully! Let's start deep learning with "
          "Fluid programs now")

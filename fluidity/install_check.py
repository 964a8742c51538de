"""`fluid.install_check.run_check()`: is this Fluidity able to build and train a program?

It builds a tiny linear model in its own programs and scope and trains it a few steps with
SGD three ways: on the Executor, data parallel on two CPU places
(`CompiledProgram.with_data_parallel`, as Fluid's check does) and as native code (`CompiledProgram.with_native_code`: one segment generated, compiled with the
C++ compiler and linked with the BLAS, then run), checking that the loss fell each time and
that the native run computes what the interpreter does. It then prints that it works
(Fluid's success message, for Fluidity). A failure raises the error met, and what is
missing is said in words: no C++ compiler, no BLAS package, a compiler that fails.
Nothing is printed as success then. The C compiler of the native data kernels is checked
too; without one they run on numpy (slower, same results), which is reported, not failed.
"""
import os
import shutil

import numpy as np

from . import layers, optimizer, unique_name
from .compiler import CompiledProgram
from .core.place import CPUPlace
from .core.scope import Scope, scope_guard
from .errors import FluidityError
from .executor import Executor
from .framework import Program, program_guard


class InstallCheckError(RuntimeError):
    """What run_check() found missing or broken, said so a user can fix it."""


def _train(exe, startup, program, loss, feed, steps=5):
    exe.run(startup)
    losses = []
    for _ in range(steps):
        (value,) = exe.run(program, feed=feed, fetch_list=[loss])
        losses.append(float(np.mean(value)))
    if not np.isfinite(losses[-1]) or losses[-1] >= losses[0]:
        raise InstallCheckError(f"install check: the loss did not fall ({losses[0]} -> "
                                f"{losses[-1]})")
    return losses


def _compiler(env, default):
    """The compiler's path, or None when it is not installed."""
    name = os.environ.get(env) or default
    return shutil.which(name.split()[0]) if name else None


def _require_native_toolchain():
    """The C++ compiler and the BLAS compiled programs need; InstallCheckError saying which
    is missing and how to get it."""
    if _compiler("CXX", "g++") is None:
        raise InstallCheckError(
            f"install check: no C++ compiler: Fluidity builds compiled programs "
            f"(CompiledProgram.with_native_code, `fluidity compile`, the AsyncExecutor's "
            f"worker threads) with $CXX (default g++), and "
            f"{os.environ.get('CXX') or 'g++'!r} is not installed. Install one (Debian/"
            f"Ubuntu: apt-get install g++) or set CXX to one.")
    from .codegen.build import blas
    try:
        blas()
    except FluidityError as e:
        raise InstallCheckError(f"install check: {e}") from None


def _native_check(exe, startup, main, loss, feed, want):
    """Train with the program compiled to native code; its losses must be the
    interpreter's (same float32 arithmetic, BLAS sums may round apart)."""
    _require_native_toolchain()
    from .codegen.build import CompileError
    compiled = CompiledProgram(main).with_native_code(feed=list(feed), fetch_list=[loss])
    try:
        with scope_guard(Scope()):
            got = _train(exe, startup, compiled, loss, feed)
    except CompileError as e:
        raise InstallCheckError(f"install check: the C++ compiler could not build a compiled "
                                f"program: {e}") from None
    if "native segment" not in compiled.explain() or " 0 native segment" in compiled.explain():
        raise InstallCheckError("install check: no op of the check's program ran as native "
                                "code:\n" + compiled.explain())
    if not np.allclose(got, want, rtol=1e-4, atol=1e-6):
        raise InstallCheckError(f"install check: the compiled program's losses {got} differ "
                                f"from the interpreter's {want}")


def _c_kernels_note():
    """A line about the native data kernels' C compiler, or None when it is there."""
    if _compiler("CC", "cc") is None:
        return (f"Note: no C compiler ({os.environ.get('CC') or 'cc'}): the MultiSlot parser and "
                f"the sparse kernels run on numpy (same results, slower); install one "
                f"(apt-get install gcc) for the native ones.")
    return None


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
        want = _train(exe, startup, main, loss, feed)
    with scope_guard(Scope()):
        _train(exe, startup, CompiledProgram(main).with_data_parallel(
            loss_name=loss.name, places=[CPUPlace(), CPUPlace()]), loss, feed)
    _native_check(exe, startup, main, loss, feed, want)
    print("Running Verify Fluid Program ... ")
    print("Your Fluidity works well on CPU, on the Executor, data parallel and as native "
          "code.")
    note = _c_kernels_note()
    if note:
        print(note)
    print("Your Fluidity is installed successfully! Let's start deep learning with "
          "Fluid programs now")

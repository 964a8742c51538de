"""The inference models PaddlePaddle saved (tests/fixtures/paddle_zoo, paddle3_zoo) run compiled with
Paddle's outputs, as they do interpreted; and how much of each compiles is reported (the
ops that do not run as Python steps between native segments, named by explain())."""
import os

import numpy as np
import pytest
from paths import FIXTURES
from test_paddle_zoo import ALL, _expected, _feed, _skip_if_pending, assert_matches

import fluidity as fluid
from fluidity import io as fio
from fluidity.codegen.lower import Lowering

# models with ops that have no compiled form yet (each runs as a Python step between native
# segments); every other model compiles whole, feed and fetch aside
PARTLY_COMPILED = {"tensor_ops", "zero_d_loss"}   # arg_max has no compiled form


@pytest.mark.parametrize("zoo, name", ALL)
def test_a_paddle_model_runs_compiled_with_paddles_outputs(zoo, name):
    _skip_if_pending(name, zoo)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fio.load_inference_model(os.path.join(zoo, name, "model"), exe)
        rows = Lowering(prog, 0).explain()
        compiled = fluid.CompiledProgram(prog).with_native_code()
        outs = exe.run(compiled, feed=_feed(name, zoo), fetch_list=fetches)
    assert_matches(outs, _expected(name, zoo), name)
    native = sum(1 for r in rows if r[2] != "python")
    assert native > 0 or all(t in ("feed", "fetch") for _, t, _, _ in rows), \
        f"{name}: nothing compiled"
    python = {t for _, t, w, _ in rows if w == "python"} - {"feed", "fetch"}
    if name not in PARTLY_COMPILED:
        assert not python, f"{name}: {sorted(python)} run as Python steps"
    print(f"{name}: {native} of {len(rows)} ops native; python: "
          f"{sorted({t for _, t, w, _ in rows if w == 'python'})}")

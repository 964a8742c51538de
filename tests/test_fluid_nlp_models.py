"""Fluid 1.8 behaviours that PaddlePaddle/models v1.8.0's NLP scripts rely on, each found by
running one of those scripts (mechanically re-imported) on synthetic data."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.core.names import OpRole


def _roles(program):
    return [(op.type, op.attr("op_role"), list(op.attr("op_role_var"))) for op in program.global_block().ops]


def test_lr_schedule_guard_marks_learning_rate_ops():
    # the Transformer's train.py builds its noam decay inside _lr_schedule_guard()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        before = len(main.global_block().ops)
        with main._lr_schedule_guard():
            lr = fluid.layers.noam_decay(8, 10)
        n_lr = len(main.global_block().ops)
        with main._lr_schedule_guard(is_with_opt=True):
            fluid.layers.scale(lr, 2.0)
        fluid.layers.scale(x, 3.0)
    roles = _roles(main)
    assert n_lr > before
    assert all(r == int(OpRole.LRSched) and v == [] for _, r, v in roles[before:n_lr])
    assert roles[n_lr][1] == int(OpRole.LRSched) | int(OpRole.Optimize)
    assert roles[-1][1] == int(OpRole.Forward)  # the guard is left behind on exit


def test_optimized_guard_records_param_and_grad():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        y = fluid.layers.fc(x, 2)
        p = main.global_block().all_parameters()[0]
        with main._optimized_guard([p, "w@GRAD"]):
            fluid.layers.scale(y, 0.5)
        fluid.layers.scale(y, 2.0)
    roles = _roles(main)
    assert roles[-2][1:] == (int(OpRole.Optimize), [p.name, "w@GRAD"])
    assert roles[-1][1:] == (int(OpRole.Forward), [])


def test_lr_schedule_guard_leaves_no_role_after_an_error():
    main = fluid.Program()
    with pytest.raises(RuntimeError):
        with main._lr_schedule_guard():
            raise RuntimeError("boom")
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [4])
        fluid.layers.scale(x, 3.0)
    assert _roles(main)[-1][1:] == (int(OpRole.Forward), [])

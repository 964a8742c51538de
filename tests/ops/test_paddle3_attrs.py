"""Every attribute, slot and op version PaddlePaddle 3.3.1 has for the op types Fluidity
registers is known to Fluidity (tests/fixtures/paddle3_op_protos.json: Paddle's OpProtos and
op versions, written by scripts/gen_paddle3_zoo.py), by compat_check's rule: declared by the
OpDef, common to every op, a kernel hint, or one of Paddle's extra attributes its CPU
kernels ignore. Paddle 3.x attributes that change a result are implemented, or refused by
name when set (tests below)."""
import json
import os

import numpy as np
import pytest
from op_test import check_output, run_op
from paths import FIXTURES

import fluidity as fluid
from fluidity.errors import FluidityError
from fluidity.ops import registry
from fluidity.transpiler.compat_check import KERNEL_HINTS, PADDLE_EXTRA_ATTRS

with open(os.path.join(FIXTURES, "paddle3_op_protos.json")) as f:
    PROTOS = json.load(f)["ops"]
OPS = sorted(t for t in PROTOS if registry.has(t))


def _known(op_type, attr):
    return (registry.get(op_type).declares(attr) or attr in KERNEL_HINTS
            or attr in PADDLE_EXTRA_ATTRS.get(op_type, ()))


def test_the_snapshot_covers_fluiditys_common_ops():
    assert len(OPS) > 150
    assert {"mul", "lookup_table", "adam", "reduce_mean", "conv2d"} <= set(OPS)


# Paddle 3.3.1's optional tensor slots Fluidity's ops lack: a program that leaves them empty
# runs; one that wires them is refused by compat_check, naming op and slot
# (test_a_program_wiring_an_unsupported_slot_is_refused)
UNSUPPORTED_SLOTS = {
    "adam": ["Moment2Max", "SkipUpdate", "out:Moment2MaxOut"],
    "adamw": ["Moment2Max", "SkipUpdate", "out:Moment2MaxOut"],
    "assign_value": ["ValuesTensor"], "pow": ["FactorTensor"],
    "reduce_all": ["AxisTensor", "AxisTensorList"], "reduce_any": ["AxisTensor", "AxisTensorList"],
    "rmsprop": ["MasterParam", "out:MasterParamOut"], "scale": ["BiasTensor"],
    "sigmoid_cross_entropy_with_logits": ["pos_weight"],
}


@pytest.mark.parametrize("op_type", OPS)
def test_every_paddle3_attribute_slot_and_version_is_known(op_type):
    p = PROTOS[op_type]
    opdef = registry.get(op_type)
    assert [a for a in p["attrs"] if not _known(op_type, a)] == []
    missing = sorted(s for s in p["inputs"] if opdef.slot(s) is None) + sorted(
        "out:" + s for s in p["outputs"] if opdef.slot(s, inputs=False) is None)
    assert missing == UNSUPPORTED_SLOTS.get(op_type, [])
    assert opdef.version >= p.get("version", 0)


def test_a_program_wiring_an_unsupported_slot_is_refused():
    from fluidity.transpiler.compat_check import UnsupportedProgramError, check_program
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.layers.data("x", [3])
        y = fluid.layers.scale(x, 2.0)
    op = main.global_block().ops[-1]
    op.desc.inputs.add(parameter="BiasTensor", arguments=[x.name])
    with pytest.raises(UnsupportedProgramError, match="scale: input BiasTensor"):
        check_program(main)
    assert y.shape == x.shape


def test_round_decimals():
    x = np.array([[0.125, 0.135, 1.25, -2.5], [12.5, 1234.5, -0.5, 7.0]], np.float32)
    check_output("round", {"X": x}, {"Out": np.round(x)})
    for n in (2, 1, -1, -2):
        check_output("round", {"X": x}, {"Out": np.round(x, n)}, {"decimals": n},
                     atol=0, rtol=0)


def test_truncated_gaussian_random_cutoffs():
    attrs = {"shape": [4000], "mean": 1.0, "std": 2.0, "a": 0.5, "b": 2.0, "seed": 7}
    out = run_op("truncated_gaussian_random", {}, attrs)["Out"]
    assert out.min() >= 0.5 and out.max() <= 2.0 and out.std() > 0.3
    out = run_op("truncated_gaussian_random", {}, {**attrs, "a": -2.0, "b": 2.0})["Out"]
    assert out.min() >= -2.0 and out.max() <= 2.0
    with pytest.raises(FluidityError, match="truncated_gaussian_random.*a .* less than b"):
        run_op("truncated_gaussian_random", {}, {**attrs, "a": 2.0, "b": 2.0})
    # Fluid's TruncatedNormal initializer keeps its cut at mean -+ 2 std
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fluid.layers.create_parameter([3], "float32", default_initializer=fluid.initializer
                                      .TruncatedNormal(loc=1.0, scale=0.1))
    op = startup.global_block().ops[0]
    assert (op.attr("a"), op.attr("b")) == pytest.approx((0.8, 1.2))


@pytest.mark.parametrize("op_type,attrs,ins", [
    ("adam", {"amsgrad": True}, None),      # (matmul's head_number is built: test_matmul)
])
def test_result_changing_paddle3_attributes_are_refused_by_name(op_type, attrs, ins):
    if ins is None:
        p = np.ones(3, np.float32)
        ins = {"Param": p, "Grad": p, "LearningRate": np.array(0.1, np.float32),
               "Moment1": p * 0, "Moment2": p * 0, "Beta1Pow": np.array([0.9], np.float32),
               "Beta2Pow": np.array([0.999], np.float32)}
    name = next(iter(attrs))
    with pytest.raises(FluidityError, match=f"{op_type}.*{name}"):
        run_op(op_type, ins, attrs)


def test_auc_ignores_ins_tag_weight_as_paddle():
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 1, (8, 1)).astype(np.float32)
    ins = {"Predict": np.concatenate([1 - p, p], 1), "Label": rng.integers(0, 2, (8, 1)),
           "StatPos": np.zeros([1, 16], np.int64), "StatNeg": np.zeros([1, 16], np.int64)}
    attrs = {"num_thresholds": 15, "slide_steps": 0}
    want = run_op("auc", ins, attrs)["AUC"]
    for w in (0.0, 2.0):
        ins2 = {**ins, "StatPos": ins["StatPos"] * 0, "StatNeg": ins["StatNeg"] * 0,
                "InsTagWeight": np.array([[w]], np.float32)}
        assert run_op("auc", ins2, attrs)["AUC"] == want

"""Fluid 1.8's module paths under fluid.layers: every name of each module's `__all__`
(tests/fixtures/fluid18_layers_all.json, read from Paddle 1.8's sources) imports from that
module as the same object `fluid.layers.<name>` is; `import *` gives them; and the helper
modules without an `__all__` in Fluid (utils, layer_function_generator, math_op_patch) work."""
import collections
import importlib
import json
import os
import warnings

import numpy as np
import pytest

import fluidity as fluid

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures",
                       "fluid18_layers_all.json")
with open(FIXTURE) as f:
    LAYOUT = json.load(f)["modules"]
REEXPORTED = [m for m in LAYOUT if m != "layer_function_generator"]


@pytest.mark.parametrize("module", sorted(LAYOUT))
def test_every_name_imports_from_its_fluid_module(module):
    mod = importlib.import_module(f"fluidity.layers.{module}")
    missing = [n for n in LAYOUT[module] if not hasattr(mod, n)]
    assert not missing, f"fluidity.layers.{module} lacks {missing}"
    star = {}
    exec(f"from fluidity.layers.{module} import *", star)
    assert not [n for n in LAYOUT[module] if n not in star]


@pytest.mark.parametrize("module", REEXPORTED)
def test_module_names_are_the_layers_objects(module):
    mod = importlib.import_module(f"fluidity.layers.{module}")
    differ = [n for n in LAYOUT[module] if getattr(mod, n) is not getattr(fluid.layers, n)]
    assert not differ
    assert set(LAYOUT[module]) <= set(fluid.layers.__all__)


def test_reduce_max_from_layers_nn_runs():
    from fluidity.layers.nn import reduce_max
    from fluidity.layers.tensor import assign
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        out = reduce_max(assign(x), dim=1)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
    np.testing.assert_array_equal(got, [2, 5])


def test_utils_nest_functions():
    from fluidity.layers import utils
    Pair = collections.namedtuple("Pair", "a b")
    nest = {"z": [1, (2, 3)], "a": Pair(4, {"k": 5})}
    assert utils.flatten(nest) == [4, 5, 1, 2, 3]   # dict values in key order
    doubled = utils.map_structure(lambda v: v * 2, nest)
    assert doubled == {"z": [2, (4, 6)], "a": Pair(8, {"k": 10})}
    assert isinstance(doubled["a"], Pair)
    assert utils.pack_sequence_as([0, (0, 0)], [7, 8, 9]) == [7, (8, 9)]
    assert utils.flatten("leaf") == ["leaf"] and not utils.is_sequence("ab")
    utils.assert_same_structure([1, (2, 3)], [4, (5, 6)])
    with pytest.raises(ValueError, match="same number of elements"):
        utils.assert_same_structure([1, 2], [1])
    with pytest.raises(TypeError, match="sequence type"):
        utils.assert_same_structure([1, 2], (1, 2))
    with pytest.raises(ValueError, match="Could not pack"):
        utils.pack_sequence_as([0, 0], [1])
    assert utils.convert_to_list(3, 2, "stride") == [3, 3]
    assert utils.convert_to_list((1, 2), 2, "stride") == [1, 2]
    with pytest.raises(ValueError, match="stride's length must be 2"):
        utils.convert_to_list((1, 2, 3), 2, "stride")
    with pytest.raises(ValueError, match="filter_size's type must be a list or tuple of 2"):
        utils.convert_to_list((1, "a"), 2, "filter_size")
    copied = utils.copy_mutable_vars([[1], 2])
    assert copied == [[1], 2] and utils.hold_mutable_vars([[1], 2])


def test_layer_function_generator_builds_and_runs_ops():
    from fluidity.layers.layer_function_generator import (deprecated, generate_activation_fn,
                                                          generate_layer_fn, templatedoc)
    scale = generate_layer_fn("scale")
    sigmoid = generate_activation_fn("sigmoid")
    x = np.array([[-1.0, 0.5]], np.float32)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.layers.assign(x)
        a = scale(x=v, scale=3.0, bias=1.0)
        b = sigmoid(v)
        c = scale(v, scale=2.0, act="relu")
        with pytest.raises(TypeError, match="unknown argument"):
            scale(v, no_such_attr=1)
        with pytest.raises(ValueError, match="must be variable"):
            scale(x=x)
    got = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[a, b, c])
    np.testing.assert_allclose(got[0], x * 3 + 1)
    np.testing.assert_allclose(got[1], 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(got[2], np.maximum(x * 2, 0))
    assert scale.__name__ == "scale" and "bias" in scale.__doc__
    with pytest.raises(ValueError, match="one non intermediate output"):
        generate_layer_fn("top_k")   # Out and Indices

    @deprecated
    def old(v):
        return v + 1
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert old(1) == 2
    assert w and issubclass(w[0].category, DeprecationWarning) and "old" in str(w[0].message)

    @templatedoc(op_type="scale")
    def documented():
        """${comment}; scale is ${scale_type}."""
    assert "scale is float." in documented.__doc__ and "${" not in documented.__doc__


def test_math_op_patch_module():
    from fluidity.layers import math_op_patch
    assert callable(math_op_patch.monkey_patch_variable)


def test_fluid_input_is_fluids_module_of_the_v2_input_layers():
    import fluidity.input as fin
    assert fluid.input is fin and fin.__all__ == ["one_hot", "embedding"]
    assert fin.embedding is fluid.embedding and fin.one_hot is fluid.one_hot

"""Layers refuse a non-Variable argument naming the layer and the argument: in Fluid 1.8's
wording where Fluid checks it (layers/arg_checks.py), else in check_variables' own."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity.layers.checks import check_variables


def test_check_variables_names_layer_and_argument():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", [3])
        check_variables("demo", x=x)                    # a Variable passes
        with pytest.raises(TypeError, match=r"demo: 'y' must be a Variable, got ndarray"):
            check_variables("demo", x=x, y=np.zeros(3))


@pytest.mark.parametrize("call, layer, arg", [
    (lambda x: fluid.layers.nce(np.zeros((2, 3)), x, 4), "nce", "input"),
    (lambda x: fluid.layers.crf_decoding([1.0], None), "crf_decoding", "input"),
    (lambda x: fluid.layers.gather_tree(x, 3), "gather_tree", "parents"),
    (lambda x: fluid.layers.is_empty([]), "is_empty", "x"),
    (lambda x: fluid.layers.label_smooth(1.0), "label_smooth", "label"),
])
def test_layers_refuse_a_non_variable_alike(call, layer, arg):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.layers.data("x", [1], dtype="int64")
        words = (rf"{layer}: '{arg}' must be a Variable|"
                 rf"The type of '{arg}' in fluid\.layers\.{layer} must be Variable")
        with pytest.raises(TypeError, match=words):
            call(x)

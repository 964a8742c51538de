"""Compiled forms of Fluid 1.x ops that the sample table (codegen_samples_fluid1.py) cannot
check alone: the gradient of training dropout (its forward draws a random mask and runs as
a Python step; a fixed seed gives both runs one mask)."""
import numpy as np
from codegen_samples import f32
from op_test import check_compiled_grads

import pytest


@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_training_dropouts_gradient_compiles_as_the_kernel(impl):
    attrs = {"dropout_prob": 0.3, "fix_seed": True, "seed": 5, "dropout_implementation": impl}
    done = check_compiled_grads("dropout", {"X": f32(4, 6)}, ["X"], attrs,
                                output_slots=["Out"], seed=3)
    assert "dropout_grad" in done

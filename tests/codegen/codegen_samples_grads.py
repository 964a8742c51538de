"""Samples of emit/cpu/grads_more.py's second-order gradients, through their first-order
ops: elu_grad (its gradient elu_grad_grad) and elementwise_div_grad (its gradient
elementwise_div_grad_grad); softshrink_grad is softshrink's sample's. Compiled vs the numpy
kernels by test_emitters.py."""
from codegen_samples import f32


def div_grad():
    x, y, d = f32(3, 4), f32(3, 4, lo=0.5, hi=2.0), f32(3, 4)
    return ({"X": x, "Y": y, "Out": x / y, "Out@GRAD": d}, {}, ["X", "Y", "Out@GRAD"],
            ["X@GRAD", "Y@GRAD"])


def div_grad_dx_only():
    x, y, d = f32(2, 5), f32(2, 5, lo=0.5, hi=2.0), f32(2, 5)
    return ({"X": x, "Y": y, "Out": x / y, "Out@GRAD": d}, {}, ["Out@GRAD", "Y"],
            ["X@GRAD"])


SAMPLES = {
    "elu_grad": lambda: ({"X": f32(3, 5), "Out@GRAD": f32(3, 5)}, {"alpha": 0.7},
                         ["X", "Out@GRAD"], ["X@GRAD"]),
    "elementwise_div_grad": div_grad,
}
EXTRA = {
    "elementwise_div_grad, dX only": ("elementwise_div_grad", div_grad_dx_only),
}

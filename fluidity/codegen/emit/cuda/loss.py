"""CUDA emitters of cross_entropy2 and softmax_with_cross_entropy and their gradients, one
device thread per row (runtime/cuda_ops.h). A label out of range gives a NaN loss there (a
kernel cannot stop the run; the C++ target reports it)."""
from .. import register
from ..loss import (cross_entropy2_operands, cross_entropy_grad2_operands,
                    softmax_xent_grad_operands, softmax_xent_operands)


@register("cross_entropy2", "cuda")
def cross_entropy2(e):
    x, label, rows, cols, y, match, ig = cross_entropy2_operands(e)
    e.code(f"fl::cu::cross_entropy2_rows({x}, {label}, {y}, {match}, {rows}, {cols}, {ig}LL);")


@register("cross_entropy_grad2", "cuda")
def cross_entropy_grad2(e):
    label, match, dy, rows, cols, g, ig = cross_entropy_grad2_operands(e)
    e.code(f"fl::cu::cross_entropy2_rows_grad({label}, {match}, {dy}, {g}, {rows}, {cols}, "
           f"{ig}LL);")


@register("softmax_with_cross_entropy", "cuda")
def softmax_with_cross_entropy(e):
    x, label, rows, cols, prob, loss = softmax_xent_operands(e)
    e.code(f"fl::cu::softmax_xent_rows({x}, {label}, {prob}, {loss}, {rows}, {cols}, "
           f"{e.attr('ignore_index')}LL);")


@register("softmax_with_cross_entropy_grad", "cuda")
def softmax_with_cross_entropy_grad(e):
    label, prob, dloss, rows, cols, d = softmax_xent_grad_operands(e)
    e.code(f"fl::cu::softmax_xent_rows_grad({prob}, {label}, {dloss}, {d}, {rows}, {cols}, "
           f"{e.attr('ignore_index')}LL);")

"""CUDA emitters of batch_norm and its gradient (runtime/cuda_ops.h): the C++ target's
arithmetic, one thread per channel for the statistics (summed in double, in its order) and
one per element for Y and X@GRAD."""
from ....ops.norm import bn_global_stats
from .. import register
from ..norm import bn_grad_inputs, bn_inputs


@register("batch_norm", "cuda")
def batch_norm(e):
    x, scale, bias, mean, var = bn_inputs(e)
    c, n, p = x.dims[1], x.dims[0], e.prod(x.dims[2:])
    y = e.output("Y", x.dims)
    eps = e.literal(float(e.attr("epsilon")))
    if bn_global_stats(e.attrs):
        m, v = mean, var
        for slot, run in (("MeanOut", mean), ("VarianceOut", var)):
            if e.has_output(slot):
                out = e.output(slot, run.dims)
                if out is not run:
                    e.code(f"fl::cu::copy({run}, {out}, {c});")
    else:
        m, v = e.scratch([c]), e.scratch([c])
        mom = float(e.attr("momentum"))
        e.code(f"fl::cu::bn_channel_stats({x}, {m}, {v}, {n}, {c}, {p});")
        for slot, run, batch in (("MeanOut", mean, m), ("VarianceOut", var, v)):
            if e.has_output(slot):
                out = e.output(slot, run.dims)
                e.code(f"fl::cu::bn_running({run}, {batch}, {out}, {c}, {e.literal(mom)}, "
                       f"{e.literal(1.0 - mom)});")
    inv = e.output("SavedVariance", [c]) if e.has_output("SavedVariance") else e.scratch([c])
    sm = e.output("SavedMean", [c]) if e.has_output("SavedMean") else "nullptr"
    e.code(f"fl::cu::bn_inverse_std({v}, {m}, {inv}, {sm}, {c}, {eps});")
    e.code(f"fl::cu::bn_apply({x}, {scale}, {bias}, {m}, {inv}, {y}, {x.numel()}, {c}, {p});")


@register("batch_norm_grad", "cuda")
def batch_norm_grad(e):
    x, scale, sm, inv, dy = bn_grad_inputs(e)
    c, n, p = x.dims[1], x.dims[0], e.prod(x.dims[2:])
    db = e.output("Bias@GRAD", [c]) if e.has_output("Bias@GRAD") else e.scratch([c])
    ds = e.output("Scale@GRAD", [c]) if e.has_output("Scale@GRAD") else e.scratch([c])
    e.code(f"fl::cu::bn_grad_channel_sums({x}, {dy}, {sm}, {inv}, {db}, {ds}, {n}, {c}, {p});")
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims)
        glob = "true" if bn_global_stats(e.attrs) else "false"
        e.code(f"fl::cu::bn_grad_x({x}, {dy}, {scale}, {sm}, {inv}, {db}, {ds}, {dx}, {n}, "
               f"{c}, {p}, {glob});")

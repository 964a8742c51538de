"""What both targets' emitters of the normalizations share: batch_norm's operands."""
from ...ops.common import channel_last


def bn_inputs(e):
    """batch_norm's compiled case for both targets (NCHW-style, no MomentumTensor, the
    channels known): X, Scale, Bias, Mean, Variance."""
    if channel_last(e.attr("data_layout")) or e.op.input("MomentumTensor"):
        e.fail("NHWC layout or a MomentumTensor")
    x, scale, bias, mean, var = (e.input(s) for s in ("X", "Scale", "Bias", "Mean",
                                                     "Variance"))
    e.require_float(x, scale, bias, mean, var)
    if x.ndim < 2 or not e.is_lit(x.dims[1]):
        e.fail("channels not known when compiling")
    return x, scale, bias, mean, var


def bn_grad_inputs(e):
    """batch_norm_grad's compiled case for both targets (NCHW-style, the channels known):
    X, Scale, SavedMean, SavedVariance (1 / std), Y@GRAD."""
    if channel_last(e.attr("data_layout")):
        e.fail("NHWC layout")
    x, scale, sm, inv, dy = (e.input(s) for s in ("X", "Scale", "SavedMean",
                                                  "SavedVariance", "Y@GRAD"))
    e.require_float(x, scale, sm, inv, dy)
    if x.ndim < 2 or not e.is_lit(x.dims[1]):
        e.fail("channels not known when compiling")
    return x, scale, sm, inv, dy



"""fluid.layers names Fluidity does not build: each raises NotImplementedError saying why.
A module that builds one of these names later takes precedence (layers/__init__ binds a
declined name only where no real layer has it)."""
from ..errors import declined_class


_RNN_API = ("Fluid 1.8's cell API (rnn, cells, decoders, dynamic_decode) is not built; use "
            "StaticRNN, DynamicRNN, dynamic_lstm or dynamic_gru")
_DETECTION = "a detection layer, outside Fluidity's scope"

# name: why
DECLINED = {
    "similarity_focus": "the similarity_focus op is not built",
    "lstm": "the cuDNN LSTM op is not built; use dynamic_lstm or StaticRNN",
    "dynamic_lstmp": "the projected LSTM op (lstmp) is not built; use dynamic_lstm",
    "RNNCell": _RNN_API, "GRUCell": _RNN_API, "LSTMCell": _RNN_API, "Decoder": _RNN_API,
    "BeamSearchDecoder": _RNN_API, "rnn": _RNN_API, "dynamic_decode": _RNN_API,
    "DecodeHelper": _RNN_API, "TrainingHelper": _RNN_API, "GreedyEmbeddingHelper": _RNN_API,
    "SampleEmbeddingHelper": _RNN_API, "BasicDecoder": _RNN_API,
    "roi_pool": _DETECTION, "roi_align": _DETECTION, "psroi_pool": _DETECTION,
    "prroi_pool": _DETECTION, "deformable_conv": _DETECTION,
    "deformable_roi_pooling": _DETECTION, "sigmoid_focal_loss": _DETECTION,
    "resize_trilinear": "the 3-D trilinear_interp op is not built",
    "adaptive_pool3d": "pool3d's adaptive mode is not built",
    "tree_conv": ("the tree_conv op (tree-based convolution over edge sets, TBCNN) and its "
                  "tree-to-column transform are not built"),
}
# the classes of the cell API with Fluid's method names, so a program calling one gets the
# reason rather than an AttributeError
_CELL = ("call", "get_initial_states")
_DECODER = ("initialize", "step", "finalize")
DECLINED_CLASSES = {"RNNCell": _CELL, "GRUCell": _CELL, "LSTMCell": _CELL,
                    "Decoder": _DECODER,
                    "BeamSearchDecoder": _DECODER + ("tile_beam_merge_with_batch",)}


def declined(name, why):
    """A callable (function or class stand-in) named `name` that raises NotImplementedError."""
    def layer(*args, **kwargs):
        raise NotImplementedError(f"fluid.layers.{name} is not available in Fluidity: {why}")
    layer.__name__ = layer.__qualname__ = name
    layer.__doc__ = f"Not built in Fluidity: {why}"
    return layer


__all__ = list(DECLINED)
for _name, _why in DECLINED.items():
    if _name in DECLINED_CLASSES:
        globals()[_name] = declined_class(f"layers.{_name}", _why, DECLINED_CLASSES[_name])
    else:
        globals()[_name] = declined(_name, _why)

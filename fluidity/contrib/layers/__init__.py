"""`fluid.contrib.layers`: basic_lstm / basic_gru and their one-step units;
fused_elemwise_activation, fused_embedding_seq_pool."""
from . import fused, rnn_impl
from .fused import *  # noqa: F401,F403
from .rnn_impl import *  # noqa: F401,F403

__all__ = list(rnn_impl.__all__) + list(fused.__all__)

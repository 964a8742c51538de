"""`fluid.contrib.layers`: basic_lstm / basic_gru and their one-step units."""
from . import rnn_impl
from .rnn_impl import *  # noqa: F401,F403

__all__ = list(rnn_impl.__all__)

"""`fluid.contrib.decoder`: Fluid 1.0-1.5's beam search decoder API."""
from . import beam_search_decoder
from .beam_search_decoder import *  # noqa: F401,F403

__all__ = list(beam_search_decoder.__all__)

"""fluid.layers.sequence_lod: the module Fluid 1.8 defines its sequence (LoD) layers in (built
in fluidity/layers/sequence.py)."""
from .sequence import (sequence_concat, sequence_conv, sequence_enumerate, sequence_expand,
                       sequence_expand_as, sequence_first_step, sequence_last_step,
                       sequence_mask, sequence_pad, sequence_pool, sequence_reshape,
                       sequence_reverse, sequence_scatter, sequence_slice, sequence_softmax,
                       sequence_unpad)

__all__ = ["sequence_conv", "sequence_softmax", "sequence_pool", "sequence_concat",
           "sequence_first_step", "sequence_last_step", "sequence_slice", "sequence_expand",
           "sequence_expand_as", "sequence_pad", "sequence_unpad", "sequence_reshape",
           "sequence_scatter", "sequence_enumerate", "sequence_mask", "sequence_reverse"]

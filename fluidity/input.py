"""`fluid.input`: the module Fluid 1.8 defines `one_hot` and `embedding` in (the ids-of-any-
shape forms, ops one_hot_v2 / lookup_table_v2; fluidity/layers/input.py builds them)."""
from .layers.input import embedding, one_hot  # noqa: F401

__all__ = ["one_hot", "embedding"]

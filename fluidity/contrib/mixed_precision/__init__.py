"""Fluid 1.8's automatic mixed precision (`fluid.contrib.mixed_precision`): `decorate` an
optimizer to train with float16 forward and backward ops, float32 master weights and
(dynamic) loss scaling; `AutoMixedPrecisionLists` says which ops run in float16."""
from . import decorator, fp16_lists, fp16_utils  # noqa: F401
from .decorator import *  # noqa: F401,F403
from .fp16_lists import *  # noqa: F401,F403

__all__ = decorator.__all__ + fp16_lists.__all__

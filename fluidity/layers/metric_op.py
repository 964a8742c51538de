"""fluid.layers.metric_op: the module Fluid 1.8 defines `accuracy` and `auc` in (built in
fluidity/layers/metric.py)."""
from .metric import accuracy, auc

__all__ = ["accuracy", "auc"]

"""`fluid.average.WeightedAverage`: a running weighted mean of per-batch values (Fluid 1.x
training loops average a batch accuracy weighted by the batch size with it; deprecated in
Fluid for `fluid.metrics.Accuracy`, and warned about as there)."""
import warnings

import numpy as np

__all__ = ["WeightedAverage"]


def _is_number(v):
    return (isinstance(v, (int, float, np.number)) and not isinstance(v, bool)) or \
        (isinstance(v, np.ndarray) and v.size == 1 and v.ndim <= 1)


class WeightedAverage:
    """add(value, weight) per batch; eval() = sum(value * weight) / sum(weight)."""

    def __init__(self):
        warnings.warn(f"The {type(self).__name__} is deprecated, please use "
                      f"fluid.metrics.Accuracy instead.", Warning, stacklevel=2)
        self.reset()

    def reset(self):
        self.numerator = None
        self.denominator = None

    def add(self, value, weight):
        if not (_is_number(value) or isinstance(value, np.ndarray)):
            raise ValueError("The 'value' must be a number(int, float) or a numpy ndarray.")
        if not _is_number(weight):
            raise ValueError("The 'weight' must be a number(int, float).")
        if self.numerator is None:
            self.numerator, self.denominator = value * weight, weight
        else:
            self.numerator = self.numerator + value * weight
            self.denominator = self.denominator + weight

    def eval(self):
        if self.numerator is None:
            raise ValueError("There is no data to be averaged in WeightedAverage.")
        return self.numerator / self.denominator

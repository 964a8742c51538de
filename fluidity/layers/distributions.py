"""Probability distributions of Fluid 1.x (`fluid.layers.Uniform`, `Normal`, `Categorical`,
`MultivariateNormalDiag`), built from other layers: sample, entropy, log_prob and
kl_divergence append ops to the current program and return Variables."""
import math

import numpy as np

from ..framework import Variable
from . import manip, nn, ops, tensor

__all__ = ["Uniform", "Normal", "Categorical", "MultivariateNormalDiag"]


def _to_variable(cls_name, arg, value, scalar=True):
    """A float32 Variable of a float (where `scalar`), list, numpy array or Variable argument;
    a TypeError for anything else, an int included, as Fluid 1.8's check_type."""
    if isinstance(value, Variable):
        return value
    if scalar and isinstance(value, float):
        value = [value]
    if isinstance(value, (list, tuple, np.ndarray)):
        return tensor.assign(np.asarray(value, np.float32).reshape(np.shape(value) or [1]))
    kinds = "a float, list, numpy array or Variable" if scalar else \
        "a list, numpy array or Variable"
    raise TypeError(f"{cls_name}: '{arg}' must be {kinds}, got {type(value).__name__}")


def _check_sample_args(cls_name, shape, seed):
    """Fluid 1.8's argument types of sample(): `shape` a list, `seed` an int."""
    if not isinstance(shape, list):
        raise TypeError(f"{cls_name}.sample: 'shape' must be a list, got "
                        f"{type(shape).__name__}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"{cls_name}.sample: 'seed' must be an int, got {type(seed).__name__}")


def _check_value(cls_name, value):
    """log_prob's `value` is a float32 Variable in Fluid 1.8 (check_variable_and_dtype)."""
    if not isinstance(value, Variable):
        raise TypeError(f"{cls_name}.log_prob: 'value' must be a Variable, got "
                        f"{type(value).__name__}")


def _broadcast_shape(*vs):
    shapes = [list(v.shape) for v in vs]
    rank = max(len(s) for s in shapes)
    out = []
    for dims in zip(*[[1] * (rank - len(s)) + s for s in shapes]):
        known = [d for d in dims if d != 1]
        out.append(-1 if -1 in known else (known[0] if known else 1))
    return out


def _draw(layer, shape, batch_like, seed, **dist):
    """A [shape + batch] draw of a standard uniform or normal (`dist`) for `batch_like`."""
    batch = list(batch_like.shape)
    if -1 in batch:
        from .control_flow import fill_constant_batch_size_like
        zero = fill_constant_batch_size_like(batch_like, batch + list(shape), "float32", 0.0)
        draw = (tensor.uniform_random_batch_size_like(zero, list(zero.shape), seed=seed,
                                                      min=0.0, max=1.0)
                if layer == "uniform" else
                tensor.gaussian_random_batch_size_like(zero, list(zero.shape), seed=seed))
        rank = len(batch)
        perm = list(range(rank, rank + len(shape))) + list(range(rank))
        return manip.transpose(draw, perm)
    out_shape = list(shape) + batch
    return (tensor.uniform_random(out_shape, min=0.0, max=1.0, seed=seed)
            if layer == "uniform" else tensor.gaussian_random(out_shape, seed=seed))


class Distribution:
    """The base of the distributions, as Fluid 1.8's: a method a distribution does not define
    raises NotImplementedError, as in Fluid 1.8 (Uniform.kl_divergence, Categorical.sample /
    log_prob, MultivariateNormalDiag.sample / log_prob)."""

    def sample(self):
        raise NotImplementedError(f"{type(self).__name__}.sample is not defined (Fluid 1.8 "
                                  f"does not define it either)")

    def entropy(self):
        raise NotImplementedError(f"{type(self).__name__}.entropy is not defined (Fluid 1.8 "
                                  f"does not define it either)")

    def kl_divergence(self, other):
        raise NotImplementedError(f"{type(self).__name__}.kl_divergence is not defined "
                                  f"(Fluid 1.8 does not define it either)")

    def log_prob(self, value):
        raise NotImplementedError(f"{type(self).__name__}.log_prob is not defined (Fluid 1.8 "
                                  f"does not define it either)")


def _without_float_batch(dist, sample, shape):
    """Fluid 1.8's sample() of a distribution built from Python floats: their batch shape
    [1] is reshaped away, so the sample is `shape`, not `shape + [1]`."""
    return nn.reshape(sample, list(shape)) if dist.all_arg_is_float else sample


class Uniform(Distribution):
    """U[low, high) (elementwise over low and high's broadcast batch shape)."""

    def __init__(self, low, high):
        # Fluid: two Python floats make a batch shape of [1] that sample() leaves out
        self.all_arg_is_float = isinstance(low, float) and isinstance(high, float)
        self.low = _to_variable("Uniform", "low", low)
        self.high = _to_variable("Uniform", "high", high)

    def sample(self, shape, seed=0):
        """A [shape + batch shape] sample ([shape] when low and high are Python floats)."""
        _check_sample_args("Uniform", shape, seed)
        width = nn.elementwise_sub(self.high, self.low)
        u = _draw("uniform", shape, nn.elementwise_add(self.low, self.high), seed)
        return _without_float_batch(
            self, nn.elementwise_add(nn.elementwise_mul(u, width), self.low), shape)

    def log_prob(self, value):
        _check_value("Uniform", value)
        inside = nn.elementwise_mul(
            manip.cast(manip.less_than(self.low, value), "float32"),
            manip.cast(manip.less_than(value, self.high), "float32"))
        return nn.elementwise_sub(ops.log(inside),
                                  ops.log(nn.elementwise_sub(self.high, self.low)))

    def entropy(self):
        return ops.log(nn.elementwise_sub(self.high, self.low))


class Normal(Distribution):
    """N(loc, scale^2) (elementwise over the broadcast batch shape)."""

    def __init__(self, loc, scale):
        self.all_arg_is_float = isinstance(loc, float) and isinstance(scale, float)
        self.loc = _to_variable("Normal", "loc", loc)
        self.scale = _to_variable("Normal", "scale", scale)

    def sample(self, shape, seed=0):
        """A [shape + batch shape] sample ([shape] when loc and scale are Python floats)."""
        _check_sample_args("Normal", shape, seed)
        z = _draw("normal", shape, nn.elementwise_add(self.loc, self.scale), seed)
        return _without_float_batch(
            self, nn.elementwise_add(nn.elementwise_mul(z, self.scale), self.loc), shape)

    def entropy(self):
        zero = nn.scale(nn.elementwise_add(self.loc, self.scale), 0.0)
        return nn.elementwise_add(nn.scale(zero, 1.0, 0.5 + 0.5 * math.log(2 * math.pi)),
                                  ops.log(self.scale))

    def log_prob(self, value):
        _check_value("Normal", value)
        diff = nn.elementwise_sub(value, self.loc)
        var = ops.square(self.scale)
        quad = nn.elementwise_div(ops.square(diff), nn.scale(var, 2.0))
        return nn.scale(nn.elementwise_add(quad, ops.log(self.scale)), -1.0,
                        -math.log(math.sqrt(2 * math.pi)))

    def kl_divergence(self, other):
        if not isinstance(other, Normal):
            raise TypeError("Normal.kl_divergence: other must be a Normal")
        ratio = ops.square(nn.elementwise_div(self.scale, other.scale))
        t1 = ops.square(nn.elementwise_div(nn.elementwise_sub(self.loc, other.loc),
                                           other.scale))
        return nn.scale(nn.elementwise_sub(nn.elementwise_add(ratio, t1), ops.log(ratio)),
                        0.5, -0.5)


def _softmax_parts(logits):
    """(logits - max, exp of it, its sum over the last dim (kept))."""
    shifted = nn.elementwise_sub(logits, manip.reduce_max(logits, dim=-1, keep_dim=True))
    e = ops.exp(shifted)
    return shifted, e, manip.reduce_sum(e, dim=-1, keep_dim=True)


class Categorical(Distribution):
    """The categorical distribution of softmax(logits) over the last dim."""

    def __init__(self, logits):
        self.logits = _to_variable("Categorical", "logits", logits, scalar=False)

    def kl_divergence(self, other):
        if not isinstance(other, Categorical):
            raise TypeError("Categorical.kl_divergence: other must be a Categorical")
        a, ea, za = _softmax_parts(self.logits)
        b, _eb, zb = _softmax_parts(other.logits)
        prob = nn.elementwise_div(ea, za)
        diff = nn.elementwise_sub(nn.elementwise_sub(a, ops.log(za)),
                                  nn.elementwise_sub(b, ops.log(zb)))
        return manip.reduce_sum(nn.elementwise_mul(prob, diff), dim=-1, keep_dim=True)

    def entropy(self):
        a, ea, za = _softmax_parts(self.logits)
        prob = nn.elementwise_div(ea, za)
        logp = nn.elementwise_sub(a, ops.log(za))
        return nn.scale(manip.reduce_sum(nn.elementwise_mul(prob, logp), dim=-1,
                                         keep_dim=True), -1.0)


class MultivariateNormalDiag(Distribution):
    """A k-variate normal with mean `loc` [k] and diagonal covariance matrix `scale` [k, k]."""

    def __init__(self, loc, scale):
        self.loc = _to_variable("MultivariateNormalDiag", "loc", loc, scalar=False)
        self.scale = _to_variable("MultivariateNormalDiag", "scale", scale, scalar=False)
        if len(self.scale.shape) != 2:
            raise ValueError(f"MultivariateNormalDiag: scale must be a [k, k] matrix, got "
                             f"{list(self.scale.shape)}")

    @staticmethod
    def _diag(value):
        k = value.shape[0]
        return manip.reduce_sum(nn.elementwise_mul(value, tensor.eye(k)), dim=-1)

    def _det(self, value):
        return manip.reduce_prod(self._diag(value))

    def _inv(self, value):
        return tensor.diag(ops.reciprocal(self._diag(value)))

    def entropy(self):
        k = self.scale.shape[0]
        return nn.scale(ops.log(self._det(self.scale)), 0.5,
                        0.5 * k * (1.0 + math.log(2 * math.pi)))

    def kl_divergence(self, other):
        if not isinstance(other, MultivariateNormalDiag):
            raise TypeError("MultivariateNormalDiag.kl_divergence: other must be a "
                            "MultivariateNormalDiag")
        inv = self._inv(other.scale)
        tr = manip.reduce_sum(nn.elementwise_mul(inv, self.scale))
        d = manip.reshape(nn.elementwise_sub(other.loc, self.loc), [1, -1])
        quad = manip.reduce_sum(nn.matmul(nn.matmul(d, inv), d, transpose_y=True))
        ln = nn.elementwise_sub(ops.log(self._det(other.scale)), ops.log(self._det(self.scale)))
        k = float(self.scale.shape[0])
        return nn.scale(nn.elementwise_add(nn.elementwise_add(tr, quad), ln), 0.5, -0.5 * k)

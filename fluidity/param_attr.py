"""ParamAttr: how a layer creates a parameter (name, initializer, regularizer, ...)."""
from .initializer import Initializer


class ParamAttr:
    def __init__(self, name=None, initializer=None, learning_rate=1.0, regularizer=None,
                 trainable=True, gradient_clip=None, do_model_average=True):
        self.name = name
        self.initializer = initializer
        self.learning_rate = learning_rate
        self.regularizer = regularizer
        self.trainable = trainable
        self.gradient_clip = gradient_clip
        self.do_model_average = do_model_average

    @staticmethod
    def to_attr(arg):
        """None -> default ParamAttr; str -> named; Initializer -> with it; False stays False."""
        if arg is None:
            return ParamAttr()
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        if isinstance(arg, Initializer):
            return ParamAttr(initializer=arg)
        if isinstance(arg, bool):
            return ParamAttr() if arg else False
        if isinstance(arg, (list, tuple)):
            return [ParamAttr.to_attr(a) for a in arg]
        raise TypeError(f"cannot make a ParamAttr from {type(arg).__name__}")


class WeightNormParamAttr(ParamAttr):
    """A parameter trained in weight-normalized form, w = g * v / ||v|| (the norm over
    every dimension but `dim`; all of them when None). The layer gets w; the trained
    parameters are `<name>_g` and `<name>_v` (LayerHelper._weight_normalized)."""

    def __init__(self, dim=None, name=None, initializer=None, learning_rate=1.0,
                 regularizer=None, trainable=True, gradient_clip=None,
                 do_model_average=False):
        super().__init__(name=name, initializer=initializer, learning_rate=learning_rate,
                         regularizer=regularizer, trainable=trainable,
                         gradient_clip=gradient_clip, do_model_average=do_model_average)
        self.dim = dim

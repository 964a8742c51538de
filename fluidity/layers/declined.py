"""fluid.layers names Fluidity does not build: each raises NotImplementedError saying why.
A module that builds one of these names later takes precedence (layers/__init__ binds a
declined name only where no real layer has it)."""
from ..errors import declined_class


# name: why
DECLINED = {
    "lstm": "the cuDNN LSTM op is not built; use dynamic_lstm or StaticRNN",
}
# declined classes, with the method names Fluid gives them, so a program calling one gets
# the reason rather than an AttributeError: {name: (method, ...)}
DECLINED_CLASSES = {}


def declined(name, why):
    """A callable (function or class stand-in) named `name` that raises NotImplementedError."""
    def layer(*args, **kwargs):
        raise NotImplementedError(f"fluid.layers.{name} is not available in Fluidity: {why}")
    layer.__name__ = layer.__qualname__ = name
    layer.__doc__ = f"Not built in Fluidity: {why}"
    return layer


__all__ = list(DECLINED)
for _name, _why in DECLINED.items():
    if _name in DECLINED_CLASSES:
        globals()[_name] = declined_class(f"layers.{_name}", _why, DECLINED_CLASSES[_name])
    else:
        globals()[_name] = declined(_name, _why)

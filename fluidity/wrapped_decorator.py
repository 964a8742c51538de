"""Fluid 1.8's `fluid.wrapped_decorator`: decorators whose result keeps the decorated
function's name, docstring and signature (`inspect.signature` follows `__wrapped__`), as
Fluid's built on the `decorator` package; model scripts import
`signature_safe_contextmanager` from here."""
import contextlib
import functools

__all__ = ["wrap_decorator", "signature_safe_contextmanager"]


def wrap_decorator(decorator_func):
    """`decorator_func` (a function -> function decorator) as one whose result has the
    decorated function's metadata and signature."""
    def decorate(func):
        wrapped = decorator_func(func)

        @functools.wraps(func)
        def impl(*args, **kwargs):
            return wrapped(*args, **kwargs)
        return impl
    return decorate


signature_safe_contextmanager = wrap_decorator(contextlib.contextmanager)

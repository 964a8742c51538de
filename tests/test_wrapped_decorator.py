"""fluid.wrapped_decorator: a context manager made with signature_safe_contextmanager works
as contextlib's and keeps the function's name, doc and signature."""
import inspect

import fluidity as fluid
from fluidity.wrapped_decorator import signature_safe_contextmanager, wrap_decorator


def test_signature_safe_contextmanager_keeps_the_signature_and_runs():
    seen = []

    @signature_safe_contextmanager
    def guard(name, depth=2):
        """A guard."""
        seen.append(("enter", name, depth))
        yield name.upper()
        seen.append(("exit", name))

    assert guard.__name__ == "guard" and guard.__doc__ == "A guard."
    assert list(inspect.signature(guard).parameters) == ["name", "depth"]
    with guard("a") as v:
        assert v == "A"
    assert seen == [("enter", "a", 2), ("exit", "a")]
    assert fluid.wrapped_decorator.wrap_decorator is wrap_decorator


def test_wrap_decorator_applies_the_decorator():
    twice = wrap_decorator(lambda f: (lambda *a, **k: 2 * f(*a, **k)))

    @twice
    def inc(x, step=1):
        return x + step
    assert inc(3) == 8 and list(inspect.signature(inc).parameters) == ["x", "step"]

"""Global flags (Paddle's gflags that Python sets with `fluid.set_flags`).

    fluid.set_flags({"FLAGS_check_nan_inf": True})
    fluid.get_flags(["FLAGS_check_nan_inf"])   # {"FLAGS_check_nan_inf": True}

FLAGS_check_nan_inf: every op's outputs are checked after it runs; the first op that writes
a NaN or Inf stops the run, naming the op, the variable and where the op was created.
Environment variables of the same names set the initial values (as Paddle reads them).
"""
import os

from ..errors import ArgumentTypeError, FlagError, FluidityError

# name -> (type, default)
_KNOWN = {"FLAGS_check_nan_inf": (bool, False)}


def _parse(name, kind, raw):
    if kind is bool and isinstance(raw, str):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise FluidityError(f"{name}: expected a bool, got {raw!r}")
    try:
        return kind(raw)
    except (TypeError, ValueError):
        raise FluidityError(f"{name}: expected a {kind.__name__}, got {raw!r}") from None


_values = {n: _parse(n, k, os.environ[n]) if n in os.environ else d
           for n, (k, d) in _KNOWN.items()}


def _check_name(name):
    if name not in _KNOWN:                # a ValueError, as Fluid's for a flag it hides
        raise FlagError(f"unknown flag {name!r}; known flags: {sorted(_KNOWN)}")


def set_flags(flags):
    """Set flags from a dict {name: value}; an unknown name changes nothing."""
    if not isinstance(flags, dict):
        raise ArgumentTypeError(f"flags in set_flags should be a dict, got "
                                f"{type(flags).__name__}")
    parsed = {}
    for name, value in flags.items():
        _check_name(name)
        parsed[name] = _parse(name, _KNOWN[name][0], value)
    _values.update(parsed)


def get_flags(flags):
    """{name: value} of a flag name or a list of names."""
    if not isinstance(flags, (str, list, tuple)):
        raise ArgumentTypeError(f"Flags in get_flags should be a list, tuple or string, got "
                                f"{type(flags).__name__}")
    names = [flags] if isinstance(flags, str) else list(flags)
    for n in names:
        _check_name(n)
    return {n: _values[n] for n in names}


def flag(name):
    return _values[name]

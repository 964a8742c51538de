"""paddle.compat's helpers (Python 2/3 text handling) as Paddle 1.8's tests call them."""
import math

int_type = int
long_type = int


def to_text(obj, encoding="utf-8", inplace=False):
    if obj is None:
        return obj
    if isinstance(obj, list):
        out = [to_text(x, encoding) for x in obj]
        if inplace:
            obj[:] = out
            return obj
        return out
    if isinstance(obj, set):
        out = {to_text(x, encoding) for x in obj}
        if inplace:
            obj.clear()
            obj.update(out)
            return obj
        return out
    if isinstance(obj, dict):
        out = {to_text(k, encoding): to_text(v, encoding) for k, v in obj.items()}
        if inplace:
            obj.update(out)
            return obj
        return out
    if isinstance(obj, bytes):
        return obj.decode(encoding)
    return obj


def to_bytes(obj, encoding="utf-8", inplace=False):
    if obj is None:
        return obj
    if isinstance(obj, list):
        out = [to_bytes(x, encoding) for x in obj]
        if inplace:
            obj[:] = out
            return obj
        return out
    if isinstance(obj, set):
        out = {to_bytes(x, encoding) for x in obj}
        if inplace:
            obj.clear()
            obj.update(out)
            return obj
        return out
    if isinstance(obj, str):
        return obj.encode(encoding)
    return obj


def round(x, d=0):
    p = 10 ** d
    return float(math.floor(x * p + 0.5)) / p if x >= 0 else float(math.ceil(x * p - 0.5)) / p


def floor_division(x, y):
    return x // y


def get_exception_message(exc):
    assert exc is not None
    return str(exc)

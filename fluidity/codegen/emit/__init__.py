"""Emitters registered per op type and target, with an explicit fallback.

An emitter is a function `fn(e)` that writes one op's code through an `Emit` (cir.py): its
inputs as Bufs with symbolic dims, its attributes, `e.output(...)`, `e.code(line)`,
`e.check(cond, why)`, `e.fail(why)`. Each target is a folder here (`cpu/`, `cuda/`, `c/`)
holding one module per op family that registers its emitters:

    from .. import register

    @register("relu", "cpu")
    def relu(e): ...

`lookup(op_type, target)` returns the emitter, or None: the op has no compiled form there,
which cuts the compiled segment so that a Python step runs the op (never a silent wrong
answer). A target's modules are imported on its first lookup. Elementwise ops are rows of
one table (elementwise.py) that every C-family target renders.
"""
import importlib
import pkgutil

_RULES = {}            # (op type, target) -> emitter
# the ops whose emitters take a compiled tensor array or rank table as an input (cir.ArrayBuf,
# cir.TableBuf); any other op reading one is not compiled
INTERNAL_READERS = frozenset({
    "read_from_array", "write_to_array", "lod_array_length", "max_sequence_len",
    "lod_tensor_to_array", "array_to_lod_tensor", "shrink_rnn_memory",
    "reorder_lod_tensor_by_rank", "reorder_lod_tensor_by_rank_grad", "beam_search_decode",
    "tensor_array_to_tensor"})
_LOADED = set()        # targets whose modules are imported
TARGET_PACKAGES = {"cpu": "cpu", "cuda": "cuda", "c": "c"}


def register(op_type, *targets):
    """Decorator: `fn` is the emitter of `op_type` for each of `targets`. Registering one
    twice is a mistake, refused."""
    for t in targets:
        if t not in TARGET_PACKAGES:
            raise ValueError(f"unknown code generator target {t!r}")

    def add(fn):
        for t in targets:
            if (op_type, t) in _RULES:
                raise ValueError(f"'{op_type}' already has a {t} emitter")
            _RULES[(op_type, t)] = fn
        return fn
    return add


def _load(target):
    if target in _LOADED:
        return
    if target not in TARGET_PACKAGES:
        raise ValueError(f"code generator target must be one of {sorted(TARGET_PACKAGES)}, "
                         f"got {target!r}")
    _LOADED.add(target)
    pkg = importlib.import_module(f"{__name__}.{TARGET_PACKAGES[target]}")
    for info in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{info.name}")


def lookup(op_type, target):
    """The emitter of `op_type` for `target`, or None when it has no compiled form there."""
    _load(target)
    return _RULES.get((op_type, target))


def op_types(target):
    """The op types that have an emitter for `target`, sorted."""
    _load(target)
    return sorted(t for t, tg in _RULES if tg == target)


def targets_of(op_type):
    """The targets `op_type` has an emitter for, in TARGET_PACKAGES' order."""
    return [t for t in TARGET_PACKAGES if lookup(op_type, t) is not None]

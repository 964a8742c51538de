"""fluid.layers.utils: Fluid 1.8's helpers for layer arguments and nested structures.

`convert_to_list` turns `3` or `(3, 5)` into a list of n numbers, naming the argument when it
cannot. The nest functions treat lists, tuples, namedtuples and dicts (keys in sorted order)
as structure and anything else (a string included) as a leaf, as Fluid's RNN code does:
`flatten`, `pack_sequence_as`, `map_structure`, `assert_same_structure`.
"""
import collections.abc
import copy
import numbers

__all__ = ["convert_to_list", "is_sequence", "flatten", "pack_sequence_as", "map_structure",
           "assert_same_structure", "hold_mutable_vars", "copy_mutable_vars"]


def convert_to_list(value, n, name, dtype=int):
    """[value] * n for a single number, else list(value) checked to hold n numbers of
    `dtype`; ValueError naming `name` otherwise."""
    if isinstance(value, dtype) or dtype is int and isinstance(value, numbers.Integral):
        return [value] * n
    try:
        values = list(value)
    except TypeError:
        raise ValueError(f"The {name}'s type must be list or tuple. Received: {value!r}") \
            from None
    if len(values) != n:
        raise ValueError(f"The {name}'s length must be {n}. Received: {value!r}")
    for v in values:
        try:
            dtype(v)
        except (ValueError, TypeError):
            raise ValueError(f"The {name}'s type must be a list or tuple of {n} "
                             f"{dtype.__name__}. Received: {value!r} including element {v!r} "
                             f"of type {type(v).__name__}") from None
    return values


def is_sequence(seq):
    """Whether `seq` is structure (a dict, or a sequence that is not a string)."""
    if isinstance(seq, dict):
        return True
    return isinstance(seq, collections.abc.Sequence) and not isinstance(seq, (str, bytes))


def _sorted_keys(d):
    try:
        return sorted(d)
    except TypeError:
        raise TypeError("nest only supports dicts with sortable keys.") from None


def _children(nest):
    if isinstance(nest, dict):
        return [nest[k] for k in _sorted_keys(nest)]
    return list(nest)


def flatten(nest):
    """The leaves of `nest`, depth first (dict values in key order); [nest] for a leaf."""
    if not is_sequence(nest):
        return [nest]
    out = []
    for child in _children(nest):
        out.extend(flatten(child))
    return out


def _like(instance, values):
    """`values` as a sequence of `instance`'s kind (dict, namedtuple, list, tuple)."""
    if isinstance(instance, dict):
        by_key = dict(zip(_sorted_keys(instance), values))
        return type(instance)((k, by_key[k]) for k in instance)
    if isinstance(instance, tuple) and hasattr(instance, "_fields"):
        return type(instance)(*values)
    return type(instance)(values)


def _pack(structure, flat, index):
    packed = []
    for child in _children(structure):
        if is_sequence(child):
            index, sub = _pack(child, flat, index)
            packed.append(_like(child, sub))
        else:
            packed.append(flat[index])
            index += 1
    return index, packed


def pack_sequence_as(structure, flat_sequence):
    """`flat_sequence`'s items arranged as `structure`'s leaves are."""
    if not is_sequence(flat_sequence):
        raise TypeError("flat_sequence must be a sequence")
    if not is_sequence(structure):
        if len(flat_sequence) != 1:
            raise ValueError(f"Structure is a scalar but len(flat_sequence) == "
                             f"{len(flat_sequence)} > 1")
        return flat_sequence[0]
    n = len(flatten(structure))
    if n != len(flat_sequence):
        raise ValueError(f"Could not pack sequence. Structure had {n} elements, but "
                         f"flat_sequence had {len(flat_sequence)} elements.  Structure: "
                         f"{structure}, flat_sequence: {flat_sequence}.")
    return _like(structure, _pack(structure, flat_sequence, 0)[1])


def map_structure(func, *structure):
    """`func` applied to the leaves of the structures side by side, in the first's shape."""
    flats = [flatten(s) for s in structure]
    return pack_sequence_as(structure[0], [func(*leaves) for leaves in zip(*flats)])


def hold_mutable_vars(structure):
    """Whether any item of `structure` is itself structure (a list, dict, ...)."""
    return any(is_sequence(s) for s in structure)


def copy_mutable_vars(structure):
    """`structure` rebuilt with new containers around the same leaves."""
    return pack_sequence_as(structure, copy.copy(flatten(structure)))


def _assert_same(a, b, check_types):
    if is_sequence(a) != is_sequence(b):
        raise ValueError(f"The two structures don't have the same nested structure.\n\n"
                         f"First structure: {a}\n\nSecond structure: {b}.")
    if not is_sequence(a):
        return
    if check_types:
        if type(a) is not type(b):
            raise TypeError(f"The two structures don't have the same sequence type. First "
                            f"structure has type {type(a)}, while second structure has type "
                            f"{type(b)}.")
        if isinstance(a, dict) and set(a) != set(b):
            raise ValueError(f"The two dictionaries don't have the same set of keys. First "
                             f"structure has keys {set(a)}, while second structure has keys "
                             f"{set(b)}.")
    for x, y in zip(_children(a), _children(b)):
        _assert_same(x, y, check_types)


def assert_same_structure(nest1, nest2, check_types=True):
    """ValueError (TypeError for another container type with check_types) unless the two
    nests have the same structure."""
    n1, n2 = len(flatten(nest1)), len(flatten(nest2))
    if n1 != n2:
        raise ValueError(f"The two structures don't have the same number of elements.\n\n"
                         f"First structure ({n1} elements): {nest1}\n\n"
                         f"Second structure ({n2} elements): {nest2}")
    _assert_same(nest1, nest2, check_types)

"""Nested structures of Variables (`fluid.layers.utils`, Fluid 1.6-1.8): the cell API's states
and a decoder's outputs are lists, tuples, namedtuples or dicts of Variables nested at will,
and these functions walk them in one fixed order so that a structure can be flattened, mapped
and packed again. Dict entries are visited in sorted-key order (as Fluid does), so a dict and
an OrderedDict with the same keys flatten alike.

Not exported to `fluid.layers` (there `flatten` is the flatten op)."""
import collections.abc

import numpy as np

__all__ = ["convert_to_list", "is_sequence", "flatten", "pack_sequence_as", "map_structure",
           "hold_mutable_vars", "copy_mutable_vars", "assert_same_structure"]


def convert_to_list(value, n, name, dtype=int):
    """`value` (one number, or an iterable of `n`) as a list of `n` numbers of `dtype`."""
    if isinstance(value, dtype) or (dtype is int and isinstance(value, np.integer)):
        return [value] * n
    try:
        values = list(value)
    except TypeError:
        raise ValueError(f"The {name}'s type must be list or tuple. Received: {value}")
    if len(values) != n:
        raise ValueError(f"The {name}'s length must be {n}. Received: {value}")
    for v in values:
        try:
            dtype(v)
        except (ValueError, TypeError):
            raise ValueError(f"The {name}'s type must be a list or tuple of {n} {dtype}. "
                             f"Received: {value} including element {v} of type {type(v)}")
    return values


def is_sequence(seq):
    """True for a nesting level (dict, list, tuple, namedtuple; not a string)."""
    if isinstance(seq, dict):
        return True
    return isinstance(seq, collections.abc.Sequence) and not isinstance(seq, (str, bytes))


def _sorted_keys(d):
    try:
        return sorted(d)
    except TypeError:
        raise TypeError("nest only supports dicts with sortable keys.")


def _children(nest):
    if isinstance(nest, dict):
        return [nest[k] for k in _sorted_keys(nest)]
    return list(nest)


def flatten(nest):
    """The leaves of `nest`, depth first (a leaf alone gives [leaf])."""
    if not is_sequence(nest):
        return [nest]
    out = []
    for child in _children(nest):
        out.extend(flatten(child))
    return out


def _is_namedtuple(x):
    return (isinstance(x, tuple) and isinstance(getattr(x, "_fields", None),
                                                collections.abc.Sequence)
            and all(isinstance(f, str) for f in x._fields))


def _like(instance, items):
    """`items` (in visiting order) as a container of `instance`'s type."""
    if isinstance(instance, dict):
        by_key = dict(zip(_sorted_keys(instance), items))
        return type(instance)((k, by_key[k]) for k in instance)
    if _is_namedtuple(instance):
        return type(instance)(*items)
    return type(instance)(items)


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
    """`flat_sequence` nested as `structure` is (the inverse of flatten)."""
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
    """func applied leaf by leaf to structures of one shape, nested as the first is."""
    flats = [flatten(s) for s in structure]
    return pack_sequence_as(structure[0], [func(*leaves) for leaves in zip(*flats)])


def hold_mutable_vars(structure):
    """True when some entry of `structure` is itself a nesting (list, dict, ...)."""
    return any(is_sequence(s) for s in structure)


def copy_mutable_vars(structure):
    """A new structure of the same leaves (no container shared with `structure`)."""
    return pack_sequence_as(structure, list(flatten(structure)))


def _assert_same(nest1, nest2, check_types):
    seq1 = is_sequence(nest1)
    if seq1 != is_sequence(nest2):
        raise ValueError(f"The two structures don't have the same nested structure.\n\n"
                         f"First structure: {nest1}\n\nSecond structure: {nest2}.")
    if not seq1:
        return
    if check_types:
        if type(nest1) is not type(nest2):
            raise TypeError(f"The two structures don't have the same sequence type. First "
                            f"structure has type {type(nest1)}, while second structure has "
                            f"type {type(nest2)}.")
        if isinstance(nest1, dict) and set(nest1) != set(nest2):
            raise ValueError(f"The two dictionaries don't have the same set of keys. First "
                             f"structure has keys {set(nest1)}, while second structure has "
                             f"keys {set(nest2)}.")
    for a, b in zip(_children(nest1), _children(nest2)):
        _assert_same(a, b, check_types)


def assert_same_structure(nest1, nest2, check_types=True):
    """Raise ValueError (TypeError for differing container types with check_types) unless
    the two nestings have the same shape."""
    n1 = len(flatten(nest1)) if is_sequence(nest1) else 1
    n2 = len(flatten(nest2)) if is_sequence(nest2) else 1
    if n1 != n2:
        raise ValueError(f"The two structures don't have the same number of elements.\n\n"
                         f"First structure ({n1} elements): {nest1}\n\n"
                         f"Second structure ({n2} elements): {nest2}")
    _assert_same(nest1, nest2, check_types)


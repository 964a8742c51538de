"""Is a serialized ProgramDesc (a `__model__`, a `.pdmodel`, bytes handed to
`Program.parse_from_string`) fit to use? Checked once, when it is read, so that a corrupt
file fails there with a ProgramFormatError naming the file and the field, and never later as
a TypeError in a pass, an EncodeError at the next save, or a recursion in the executor.

What protobuf itself lets through is checked by `core.proto_check` (invalid UTF-8, missing
required fields, unknown enum values, misread fields). On top of that, the structure
(`RULES`, each a function over the desc that returns the first problem it finds):

* blocks: at least one; block i says idx i; block 0 has parent -1, every other block a
  parent in range whose chain reaches block 0; forward_block_idx -1 or another block;
* variables: a usable name (`name_problem`: not empty, no NUL, at most 4 KiB), unique in
  the block; an element type for tensors, whose known dims' product, in bytes, fits an
  int64 (a negative dim is unknown: Paddle saves -1 for a batch and products such as -4
  for instance_norm's statistics); lod_level >= 0;
* ops: a type; each BLOCK/BLOCKS attribute names an existing block other than the op's own
  and its ancestors, and no chain of sub-blocks leads back to a block (the executor would
  recurse forever); an attribute the registry declares as a block has that type, and a
  control-flow op whose schema needs a sub-block has one; every other attribute the
  registry declares is of its type (`registry.coerce_attr`: a FormatError naming op,
  attribute, expected and found type); argument names are usable names.
"""
import math

from ..core import dtypes, proto_check
from ..core.dtypes import VarType
from ..errors import ProgramError, ProgramFormatError
from ..ops import registry
from ..proto import framework_pb2 as pb
from .views import sub_block_ids, tensor_desc

__all__ = ["parse_program_desc", "check_program_desc", "RULES"]

AttrType = pb.AttrType
_BLOCK_TYPES = (AttrType.BLOCK, AttrType.BLOCKS)
_INT64_MAX = (1 << 63) - 1
_DTYPE_CODES = frozenset(dtypes.CODES)
_ITEMSIZE = {c: dtypes.to_numpy(c).itemsize for c in dtypes.NUMPY_CODES}


def parse_program_desc(data, what=None):
    """A checked ProgramDesc from serialized bytes; ProgramFormatError("<what>: ...")
    when they are not one (`what`: the file, when there is one)."""
    at = f"{what}: " if what else ""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProgramFormatError(f"{at}expected the bytes of a serialized ProgramDesc, got "
                                 f"{type(data).__name__}")
    desc = pb.ProgramDesc()
    try:
        desc.ParseFromString(bytes(data))
    except Exception as e:  # protobuf's DecodeError (its message says little more)
        raise ProgramFormatError(f"{at}not a ProgramDesc (protobuf cannot parse "
                                 f"{len(data)} bytes: {e})") from None
    check_program_desc(desc, what)
    return desc


def check_program_desc(desc, what=None):
    """Raise ProgramFormatError("<what>: field <path>: <problem>") for the first problem
    of `desc` (see the module's docstring)."""
    at = f"{what}: " if what else ""
    found = proto_check.find_problem(desc)
    if found is not None:
        raise ProgramFormatError(f"{at}field {found[0]}: {found[1]}")
    for rule in RULES:
        problem = rule(desc)
        if problem is not None:
            raise ProgramFormatError(at + problem)


# --- the structural rules -----------------------------------------------------------------
def _blocks(desc):
    n = len(desc.blocks)
    if not n:
        return "field blocks: the program has no blocks"
    for i, bd in enumerate(desc.blocks):
        at = f"field blocks[{i}]"
        if bd.idx != i:
            return f"{at}.idx: block #{i} says its idx is {bd.idx}"
        if i == 0 and bd.parent_idx != -1:
            return f"{at}.parent_idx: block 0 has parent {bd.parent_idx}; it must be -1"
        if i and not (0 <= bd.parent_idx < n and bd.parent_idx != i):
            return f"{at}.parent_idx: parent {bd.parent_idx} is not another of the {n} blocks"
        if bd.HasField("forward_block_idx") and bd.forward_block_idx != -1 and \
                not (0 <= bd.forward_block_idx < n and bd.forward_block_idx != i):
            return (f"{at}.forward_block_idx: {bd.forward_block_idx} is not -1 or another of "
                    f"the {n} blocks")
    for i in range(1, n):  # every parent chain ends at block 0
        seen, b = {i}, desc.blocks[i].parent_idx
        while b != 0:
            if b in seen:
                return f"field blocks[{i}].parent_idx: the chain of parents loops ({sorted(seen)})"
            seen.add(b)
            b = desc.blocks[b].parent_idx
    return None


def _dims_problem(td, itemsize):
    size = itemsize
    for d in td.dims:
        if d > 0:
            size *= d
    if size > _INT64_MAX:
        return f"dims {list(td.dims)}: {size} bytes do not fit an int64 size"
    return None


# A variable name is data: every consumer (messages, generated code, file names) treats it as
# such, so Paddle's names (`@`, `.`, `/`, `-`, unicode) and any other load; refused are only
# names nothing could use.
MAX_NAME_BYTES = 4096


def name_problem(name):
    """What makes `name` unusable as a variable name (empty, a NUL byte, longer than
    MAX_NAME_BYTES in UTF-8), or None."""
    if not name:
        return "empty variable name"
    if "\0" in name:
        return f"variable name {name[:40]!r} holds a NUL character"
    n = len(name.encode("utf-8", "surrogatepass"))
    if n > MAX_NAME_BYTES:
        return f"variable name {name[:40]!r}... is {n} bytes long (at most {MAX_NAME_BYTES})"
    return None


def _vars(desc):
    for i, bd in enumerate(desc.blocks):
        names = set()
        for k, vd in enumerate(bd.vars):
            at = f"field blocks[{i}].vars[{k}]"
            problem = name_problem(vd.name)
            if problem is not None:
                return f"{at}.name: {problem}"
            if vd.name in names:
                return f"{at}.name: variable '{vd.name}' is declared twice in block {i}"
            names.add(vd.name)
            td = tensor_desc(vd)
            if td is not None:
                if td.data_type not in _DTYPE_CODES:
                    return (f"{at}.type ('{vd.name}'): data_type "
                            f"{VarType.Type.Name(td.data_type)} is not a tensor element type")
                itemsize = _ITEMSIZE.get(td.data_type, 2)  # bfloat16, fp8: 2 bytes or less
                problem = _dims_problem(td, itemsize)
                if problem is not None:
                    return f"{at} ('{vd.name}'): {problem}"
            for sub in (vd.type.lod_tensor, vd.type.tensor_array):
                if sub.lod_level < 0:
                    return f"{at} ('{vd.name}'): lod_level {sub.lod_level} is negative"
    return None


def _ancestors(desc, b):
    out = set()
    while b >= 0:
        out.add(b)
        b = desc.blocks[b].parent_idx if b else -1
    return out


_BLOCK_ATTRS = {}   # op type -> ((name, AttrType, required), ...) of its block attributes


def _block_attrs(opdef):
    got = _BLOCK_ATTRS.get(opdef.type)
    if got is None:
        defaults = opdef.defaults()
        got = _BLOCK_ATTRS[opdef.type] = tuple(
            (n, opdef.attr_type(n), opdef.attr_type(n) == AttrType.BLOCK and defaults[n] is None)
            for n in opdef.attr_names() if opdef.attr_type(n) in _BLOCK_TYPES)
    return got


def _op_attrs(opdef, od, at):
    """Problems of an op's attributes against its schema: block-typed ones, then the type of
    every other attribute the schema declares (registry.coerce_attr: what Paddle writes is
    accepted, a string where a number belongs and the like are not)."""
    specs = _block_attrs(opdef)
    have = {a.name: a for a in od.attrs} if specs else {}
    for name, want, required in specs:
        a = have.get(name)
        if a is None:
            if required:
                return f"{at}: op '{od.type}' has no attribute '{name}' (its sub-block)"
        elif a.type != want:
            return (f"{at}: attribute '{name}' of op '{od.type}' is "
                    f"{AttrType.Name(a.type)}, the op needs {AttrType.Name(want)}")
    for j, a in enumerate(od.attrs):
        want = opdef.attr_type(a.name)
        if want is None or want in _BLOCK_TYPES:
            continue
        try:
            registry.coerce_attr(opdef, a.name, registry.read_attr(a), a.type)
        except ProgramError as e:
            return f"{at}.attrs[{j}]: {e}"
    return None


def _ops(desc):
    n = len(desc.blocks)
    calls = {}
    for i, bd in enumerate(desc.blocks):
        above = _ancestors(desc, i)
        for k, od in enumerate(bd.ops):
            at = f"field blocks[{i}].ops[{k}]"
            if not od.type:
                return f"{at}.type: empty op type"
            for slots, what in ((od.inputs, "inputs"), (od.outputs, "outputs")):
                for j, v in enumerate(slots):
                    for name in v.arguments:
                        problem = name_problem(name)
                        if name and problem is not None:
                            return f"{at}.{what}[{j}] ('{v.parameter}'): {problem}"
            opdef = registry.find(od.type)
            if opdef is not None:
                problem = _op_attrs(opdef, od, at)
                if problem is not None:
                    return problem
            for b in sub_block_ids(od):
                if not 0 <= b < n:
                    return (f"{at} ('{od.type}'): names sub-block {b}, but the program has "
                            f"{n} blocks")
                if b in above:
                    return (f"{at} ('{od.type}'): names block {b} as its sub-block, which is "
                            f"its own block or an ancestor of it")
                calls.setdefault(i, set()).add(b)
    loop = _find_loop(calls)
    if loop:
        return f"sub-blocks call each other in a loop: blocks {' -> '.join(map(str, loop))}"
    return None


def _find_loop(calls):
    """A cycle in {block: sub-blocks its ops run} as a list of blocks, or None."""
    state = {}
    for start in calls:
        if state.get(start):
            continue
        stack, path = [(start, iter(calls.get(start, ())))], [start]
        state[start] = 1
        while stack:
            b, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                path.pop()
                state[b] = 2
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(calls.get(nxt, ()))))
                path.append(nxt)
    return None


RULES = (_blocks, _vars, _ops)

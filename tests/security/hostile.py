"""The hostile-model corpus, shared by tests/security and scripts/fuzz.py: variable names and
attribute values a crafted model file may carry, each designed to run code - create a canary
file - if it ever reached generated C++ as text rather than as data.

`payloads(canary)` are strings that create `canary` when pasted raw where generated code
puts a name or a string (inside a string literal: broken out of by a quote or by a backslash
before a newline that the compiler splices; in a `//` comment, ended by a newline; where a
number goes, as an expression). `NAMES` are the other names a loader must take as data (every
control character, quotes, comment and trigraph openers, unicode, Paddle's own punctuation).
`wrong_values(attr_type, canary)` and `extreme_values(attr_type)` are what every attribute of
an op with an emitter is given.
"""
import math
import re

from fluidity.ir.op_desc import unwrap
from fluidity.proto import framework_pb2 as pb

AttrType = pb.AttrType


def _act(canary):
    """C++ that creates `canary`, written without a quote or a backslash (so that no
    escaping of those two characters alone can defuse it)."""
    path = ",".join(str(b) for b in canary.encode()) + ",0"
    return (f"{{ const char pwn_p[] = {{{path}}}; const char pwn_m[] = {{119,0}}; "
            f"std::FILE* pwn_f = std::fopen(pwn_p, pwn_m); if (pwn_f) std::fclose(pwn_f); }}")


def payloads(canary):
    """Strings that would create `canary` if they reached generated source unescaped (or
    escaped for quotes and backslashes only, as the code generator once did: the second)."""
    act = _act(canary)
    return [
        f'x"); {act} //',                          # a quote ends the literal
        f'x\\\n"); {act} //',                   # a line splice, then a quote
        f"x\\\n\\\n{act} //",
        f'x??/\n"); {act} //',                    # a trigraph backslash
        f"x\n{act}\n//",                         # a newline ends a // comment
        f"*/ {act} /*",                            # closes a /* comment
        f"(({act}), 0) + 0",                       # an expression where a number goes
        f"0); {act} (void)(0",
        f"\n}}\n__attribute__((constructor)) static void pwn_ctor() {act}\n"
        f"static void pwn2() {{\n",
    ]


NAMES = ([f"ctl{c:02x}_{chr(c)}_end" for c in range(1, 32)] +
         ["del_\x7f", 'dq_"_', "sq_'_", "bs_\\_", "bsnl_\\\n", "bs_end\\", "cc_*/_", "co_/*_",
          "lc_//_", "tg_??/_", "tg_??=_", "pct_%s%n_", "nl_\n_", "cr_\r_", "é_accent",
          "名字_cjk", "emoji_😀", "rtl_\u202e_", "x@GRAD@RENAME@0", "fc_0.w_0", "a/b-c.d",
          "sp ace", "u" * 2000])


def hostile_names(canary):
    """Every name of the corpus: the payloads and NAMES (none with a NUL, which no loader
    takes)."""
    return payloads(canary) + NAMES


# --- attributes -----------------------------------------------------------------------------
_NUMERIC = (AttrType.INT, AttrType.LONG, AttrType.FLOAT, AttrType.FLOAT64, AttrType.BOOLEAN)
_LISTS = (AttrType.INTS, AttrType.LONGS, AttrType.FLOATS, AttrType.FLOAT64S, AttrType.BOOLEANS)


def wrong_values(attr_type, canary):
    """(AttrType to store it as, value) pairs of the wrong type for an attribute of
    `attr_type`: a string payload where a number or list goes, a float where an int goes, a
    number where a string goes, a list where a scalar goes."""
    text = payloads(canary)[6]
    if attr_type in _NUMERIC:
        out = [(AttrType.STRING, text), (AttrType.STRINGS, [text]),
               (AttrType.INTS, [1, 2])]
        if attr_type in (AttrType.INT, AttrType.LONG, AttrType.BOOLEAN):
            out.append((AttrType.FLOAT, 1.5))
        return out
    if attr_type in _LISTS:
        return [(AttrType.STRING, text), (AttrType.STRINGS, [text]), (AttrType.INT, 3)]
    if attr_type == AttrType.STRING:
        return [(AttrType.INT, 7), (AttrType.STRINGS, [text])]
    if attr_type == AttrType.STRINGS:
        return [(AttrType.STRING, text), (AttrType.INTS, [1])]
    return []


def extreme_values(attr_type):
    """(AttrType, value) pairs of the right type and extreme value."""
    if attr_type == AttrType.INT:
        return [(AttrType.INT, v) for v in (-2 ** 31, 2 ** 31 - 1, -1, 0)]
    if attr_type == AttrType.LONG:
        return [(AttrType.LONG, v) for v in (-2 ** 63, 2 ** 63 - 1, 2 ** 40)]
    if attr_type in (AttrType.FLOAT, AttrType.FLOAT64):
        return [(attr_type, v) for v in (math.inf, -math.inf, math.nan, 3.4e38, -0.0, 1e-45)]
    if attr_type in (AttrType.INTS, AttrType.LONGS):
        big = 2 ** 31 - 1 if attr_type == AttrType.INTS else 2 ** 62
        return [(attr_type, []), (attr_type, [big, big]), (attr_type, [-2 ** 31, -1]),
                (attr_type, [0] * 9)]
    if attr_type in (AttrType.FLOATS, AttrType.FLOAT64S):
        return [(attr_type, []), (attr_type, [math.nan, math.inf])]
    if attr_type == AttrType.STRING:
        return [(AttrType.STRING, ""), (AttrType.STRING, "\\\n\"*/??/"),
                (AttrType.STRING, "é" * 100)]
    return []


_FIELD = {AttrType.INT: "i", AttrType.FLOAT: "f", AttrType.STRING: "s", AttrType.BOOLEAN: "b",
          AttrType.LONG: "l", AttrType.FLOAT64: "float64", AttrType.INTS: "ints",
          AttrType.FLOATS: "floats", AttrType.STRINGS: "strings", AttrType.BOOLEANS: "bools",
          AttrType.LONGS: "longs", AttrType.FLOAT64S: "float64s"}


def set_raw_attr(op_desc, name, attr_type, value):
    """Set attribute `name` of an OpDesc to `value` stored as `attr_type`, bypassing every
    check (what a crafted file holds). `op_desc` is the message or the builder's handle."""
    op_desc = unwrap(op_desc)
    for a in list(op_desc.attrs):
        if a.name == name:
            op_desc.attrs.remove(a)
    a = op_desc.attrs.add()
    a.name, a.type = name, attr_type
    if isinstance(value, list):
        getattr(a, _FIELD[attr_type]).extend(value)
    else:
        setattr(a, _FIELD[attr_type], value)
    return a


def code_of(source):
    """C/C++ `source` as the compiler reads it - lines spliced where a backslash ends one -
    with its string and character literals emptied and its comments removed: its code. A
    payload found in it reached the source as code, whatever the canary says."""
    source = re.sub(r"\\[ \t]*\n", "", source)
    out, i, n = [], 0, len(source)
    while i < n:
        c = source[i]
        if c in "\"'":
            j = i + 1
            while j < n and source[j] != c:
                j += 2 if source[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        elif source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


MARKERS = ("pwn", "fopen", "CANARY")


def assert_no_payload(source):
    """No marker of the payloads is in `source` outside literals and comments."""
    code = code_of(source)
    found = [m for m in MARKERS if m in code]
    assert not found, f"payload markers {found} in generated code"

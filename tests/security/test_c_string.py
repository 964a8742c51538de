"""The one escaping function for C/C++ string literals (codegen/cir.py c_string), checked by
the compiler itself: a translation unit holding the literal of every byte value 0-255, of
multi-byte UTF-8, and of the strings that broke out of literals before (a backslash before a
newline, a quote, `*/`, the trigraph `??/`) is compiled, and each literal must hold exactly the
bytes it was made from - no more (nothing spilled out as code), no less. `checked_source`
refuses generated source that holds anything an unescaped string could have put there."""
import ctypes

import pytest

from fluidity.codegen import build
from fluidity.codegen.cir import GeneratedSourceError, c_string, checked_source

SPECIAL = [
    "", "a\\", "a\\\nb", "x\\\n\"); (void)0; //", "\"", "\\\"", "*/", "/*", "//", "??/", "??=",
    "?\\?/\n", "a\rb", "tab\there", "\x00mid", "é", "名字", "😀", "\u202eRTL", "%n%s%x",
    "\ud800",                           # a lone surrogate (from a Python str, never a desc)
    "name@GRAD.tmp_0/fc-1", "a" * 600 + "\\", "\x7f\x1b[31m",
]


def _strings():
    return [chr(b) for b in range(256)] + ["x" + chr(b) + "7" for b in range(256)] + SPECIAL


def _expected(s):
    return s.encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
def compiled():
    """(strings, library) of one generated unit returning each literal's bytes."""
    strings = _strings()
    lits = ",\n".join(f"  {{{c_string(s)}, sizeof({c_string(s)}) - 1}}" for s in strings)
    source = checked_source(
        '#include <cstdint>\nstruct Lit { const char* p; int64_t n; };\n'
        f"static const Lit LITS[] = {{\n{lits}\n}};\n"
        'extern "C" const char* lit(int i, int64_t* n) { *n = LITS[i].n; return LITS[i].p; }\n')
    lib = build.load(build.compile_cached(source, name="c_string_check"))
    lib.lit.restype = ctypes.c_void_p
    lib.lit.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    return strings, lib


def test_every_byte_value_and_every_hostile_string_round_trips_through_the_compiler(compiled):
    strings, lib = compiled
    n = ctypes.c_int64()
    for i, s in enumerate(strings):
        p = lib.lit(i, ctypes.byref(n))
        assert ctypes.string_at(p, n.value) == _expected(s), (i, s)


@pytest.mark.parametrize("s", _strings())
def test_the_literal_is_one_printable_line_with_no_escape_left_open(s):
    lit = c_string(s)
    assert lit.startswith('"') and lit.endswith('"') and len(lit) >= 2
    assert all(0x20 <= ord(ch) < 0x7F for ch in lit)       # no newline, no raw byte
    assert "??" not in lit and "?" not in lit               # no trigraph can form
    body, k = lit[1:-1], 0
    while k < len(body):                                    # every backslash starts an escape
        if body[k] == "\\":
            nxt = body[k + 1]
            assert nxt in '\\"' or body[k + 1:k + 4].isdigit(), lit
            k += 2 if nxt in '\\"' else 4
        else:
            assert body[k] != '"', lit                      # no quote ends it early
            k += 1
    checked_source(lit)


@pytest.mark.parametrize("bad", ["x\n\"a\\\nb\"", "\"caf\xc3\xa9\"", "int a; ??/\n", "\t",
                                 "a \\  \n"])
def test_generated_source_with_an_unescaped_string_is_refused(bad):
    with pytest.raises(GeneratedSourceError, match="line"):
        checked_source("int ok;\n" + bad)

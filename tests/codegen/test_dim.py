"""Dim, the code generator's size: literals fold, symbols are tracked (an op's function takes
exactly the run-time dims its buffers use), the broadcast rule and the size arithmetic are the
ops' own, and a size that sizes memory renders overflow-checked."""
import ctypes
import os
import subprocess

import pytest

from fluidity.codegen.build import RUNTIME_DIR
from fluidity.codegen.cir import NotCompilable, aligned, prod
from fluidity.codegen.dim import Dim, dim, is_lit, symbols
from fluidity.errors import ShapeError
from fluidity.ops.common import align_for_broadcast


def test_literals_fold_and_symbols_are_kept():
    n = Dim.sym("in0_d0")
    assert dim(3) * 4 == 12 and (dim(3) * 4).is_literal
    assert str(n * 1) == "in0_d0" and str(1 * n) == "in0_d0" and (n * 0) == 0
    assert str(n * 784) == "(in0_d0 * 784)"
    assert str((n * 784) * 4) == "((in0_d0 * 784) * 4)"
    assert str(n + 0) == "in0_d0" and str(n - 1) == "(in0_d0 - 1)"
    assert dim(6) // 3 == 2 and str(n // 2) == "(in0_d0 / 2)" and n // 1 is n
    assert (n * Dim.sym("in1_nlod") + 2).symbols == {"in0_d0", "in1_nlod"}
    assert str(Dim.call("fl::arange_len", 0, n, 2)) == "fl::arange_len(0, in0_d0, 2)"


def test_a_dim_compares_with_its_literal_and_text():
    assert dim(1) == 1 and dim(1) == "1" and dim("7") == 7
    assert Dim.sym("in0_d1") == "in0_d1" and Dim.sym("in0_d1") != 1
    assert is_lit(dim(5)) and is_lit("5") and is_lit(5) and not is_lit(Dim.sym("x"))
    assert int(dim("12")) == 12
    with pytest.raises(TypeError, match="known only at run time"):
        int(Dim.sym("in0_d0"))


def test_text_is_not_a_size_unless_a_literal_or_a_name():
    assert dim("in3_h").symbols == {"in3_h"}
    with pytest.raises(TypeError, match="Dim arithmetic"):
        dim("(in0_d0 - 1)")
    with pytest.raises(ValueError):
        Dim.sym("a b")


def test_prod_is_the_ops_rule_for_dims_and_always_a_dim():
    assert prod([]) == 1 and isinstance(prod([]), Dim)
    assert str(prod([Dim.sym("in0_d0"), 3, 4])) == "((in0_d0 * 3) * 4)"
    assert symbols(prod([Dim.sym("a"), Dim.sym("b")]), None, 3) == {"a", "b"}


@pytest.mark.parametrize("x,y,axis,want", [
    ([2, 3, 4], [3], 1, [1, 3, 1]), ([2, 3, 4], [4], -1, [1, 1, 4]),
    ([2, 3, 4], [3, 1], 1, [1, 3, 1]),            # a trailing 1 hanging past X's end
    ([2, 3], [4, 2, 3], -1, [1, 2, 3]),           # Y of higher rank: the roles swap
    ([2, 3], [1, 3], 1, [1, 3]),                  # equal ranks: as they are
])
def test_one_broadcast_rule_for_ints_and_dims(x, y, axis, want):
    assert align_for_broadcast(x, y, axis) == want
    got = aligned([dim(d) for d in x], [dim(d) for d in y], axis) if len(y) <= len(x) else \
        None
    if got is not None:
        assert got == [dim(d) for d in want]
    sym = [Dim.sym(f"in0_d{k}") if d != 1 else dim(1) for k, d in enumerate(x)]
    if len(y) <= len(x):
        assert [d == 1 for d in aligned(sym, y, axis)] == [d == 1 for d in want]


def test_a_misaligned_y_is_refused_by_both():
    with pytest.raises(ShapeError, match="does not line up"):
        align_for_broadcast([2, 3], [3], 2)
    with pytest.raises(NotCompilable, match="does not line up"):
        aligned([dim(2), dim(3)], [dim(3)], 2)


def _sizes_lib(tmp_path, body):
    src = tmp_path / "s.c"
    src.write_text(f'#include "sizes.h"\n#include <stdint.h>\n{body}\n')
    lib = tmp_path / "s.so"
    cc = os.environ.get("CC") or "cc"
    r = subprocess.run([cc, "-shared", "-fPIC", f"-I{RUNTIME_DIR}", "-o", str(lib), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return ctypes.CDLL(str(lib))


def test_a_size_that_sizes_memory_renders_overflow_checked(tmp_path):
    n = Dim.sym("n")
    size = n * 1024 * 4 + 64
    text = size.checked("ok")
    assert "fl_mul_checked" in text and "fl_add_checked" in text
    lib = _sizes_lib(tmp_path, f"int64_t f(int64_t n, int* okp) {{ int ok = 1; "
                               f"int64_t r = {text}; *okp = ok; return r; }}")
    lib.f.restype = ctypes.c_int64
    lib.f.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_int)]
    ok = ctypes.c_int()
    assert lib.f(10, ctypes.byref(ok)) == 10 * 4096 + 64 and ok.value == 1
    lib.f(1 << 52, ctypes.byref(ok))
    assert ok.value == 0                      # 2^52 * 4096 overflows int64
    lib.f(-1, ctypes.byref(ok))
    assert ok.value == 0                      # a negative factor is refused too

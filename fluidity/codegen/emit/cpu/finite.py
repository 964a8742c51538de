"""C++ emitters of the float checks AMP and Fluid 1.x programs use (ops/logic.py): isinf,
isnan, isfinite (one bool over the whole of X) and isfinite_v2 (elementwise). An integer
or bool X holds no inf or nan: the kernels test zeros then, and so does this code."""
from .. import register
from ..checks import dense_only

_FLOATS = ("float", "double")

# op type -> (C test of one element `v`, whether Out says it of any element (else of all))
_WHOLE = {
    "isinf": ("std::isinf(v)", True),
    "isnan": ("std::isnan(v)", True),
    "isfinite": ("std::isfinite(v)", False),
}


def _whole(e):
    """Out[0] = test(any element) for isinf / isnan, test(every element) for isfinite; the
    loop stops at the first element that decides it."""
    test, any_ = _WHOLE[e.op.type]
    x = e.input("X")
    dense_only(e, x)
    out = e.output("Out", ["1"], "bool", lod_from=False)
    if x.ctype not in _FLOATS:
        e.code(f"{out}[0] = {'false' if any_ else 'true'};")
        return
    cond = test if any_ else f"!{test}"
    e.code(f"{{ bool hit = false; for (int64_t i = 0; i < {x.numel()} && !hit; ++i) {{ "
           f"const {x.ctype} v = {x}[i]; hit = {cond}; }} {out}[0] = "
           f"{'hit' if any_ else '!hit'}; }}")


for _t in _WHOLE:
    register(_t, "cpu")(_whole)


@register("isfinite_v2", "cpu")
def isfinite_v2(e):
    """Out[i] = whether X[i] is finite (true for every element of an integer X)."""
    x = e.input("X")
    dense_only(e, x)
    out = e.output("Out", x.dims, "bool")
    test = "std::isfinite(v)" if x.ctype in _FLOATS else "true"
    e.code(f"for (int64_t i = 0; i < {x.numel()}; ++i) {{ const {x.ctype} v = {x}[i]; "
           f"(void)v; {out}[i] = {test}; }}")

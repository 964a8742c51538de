"""C++ emitter of split (the gates of a GRU or LSTM cell written with fc + split, as the
seq2seq example's DynamicRNN decoder does)."""
from .. import register


@register("split", "cpu")
def split(e):
    """Out[i] = X's slice of `sections[i]` (or dim // num) along `axis`, copied as rows of
    the dims after it."""
    if e.op.input("AxisTensor") or e.op.input("SectionsTensorList"):
        e.fail("the axis or sections come from tensors")
    x = e.input("X")
    n_out = len(e.op.output("Out"))
    axis, num, sections = e.attr("axis"), e.attr("num"), list(e.attr("sections"))
    if not -x.ndim <= axis < x.ndim:
        e.fail(f"axis {axis} for X of rank {x.ndim}")
    axis %= x.ndim
    d = x.dims[axis]
    if num > 0:
        if num != n_out:
            e.fail(f"num={num} but the op has {n_out} outputs")
        e.check(f"{d} % {num} != 0", f"split: dim {axis} of X cannot be split into {num} "
                "equal parts")
        sizes = [d // num] * num
    else:
        if len(sections) != n_out or sections.count(-1) > 1 or any(s < -1 for s in sections):
            e.fail(f"sections {sections} for {n_out} outputs")
        rest = d - sum(s for s in sections if s >= 0)
        e.check(f"{rest} < 0" if -1 in sections else f"{rest} != 0",
                f"split: sections {sections} do not add up to dim {axis} of X")
        sizes = [rest if s == -1 else e.mul(s, 1) for s in sections]
    pre, post = e.prod(x.dims[:axis]), e.prod(x.dims[axis + 1:])
    at = e.mul(0, 1)
    for i, size in enumerate(sizes):
        out = e.output("Out", x.dims[:axis] + [size] + x.dims[axis + 1:], x.ctype, i=i)
        e.code(f"for (int64_t p = 0; p < {pre}; ++p) std::memcpy({out} + p * {size * post}, "
               f"{x} + p * {d * post} + {at * post}, sizeof(*{x}) * {size * post});")
        at = at + size

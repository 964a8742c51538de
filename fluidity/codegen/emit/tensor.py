"""What both targets' emitters of concat share: the checks and the copy of each input's
blocks (each target says how it copies one)."""







def emit_concat(e, copy_block):
    """concat for both targets: the checks, Out, and for each input X `copy_block(Out, X,
    pre, n)`, the target's C copying X's [pre, n] blocks into Out's rows (`row` long) at
    column `at`."""
    if e.op.input("AxisTensor"):
        e.fail("the axis comes from a tensor")
    xs = e.inputs("X")
    if not xs or any(b is None for b in xs) or len({b.ctype for b in xs}) != 1:
        e.fail("absent inputs or mixed dtypes")
    x0 = xs[0]
    ax = e.attr("axis") % x0.ndim
    if ax == 0 and any(b.lod is not None for b in xs):
        e.fail("axis 0 over LoD inputs joins their LoDs (the interpreter does)")
    for b in xs[1:]:
        if b.ndim != x0.ndim:
            e.fail("inputs of different ranks")
        for k in range(x0.ndim):
            if k != ax and b.dims[k] != x0.dims[k]:
                e.check(f"{b.dims[k]} != {x0.dims[k]}", "concat: inputs differ off the axis")
    total = str(sum(int(b.dims[ax]) for b in xs)) if all(e.is_lit(b.dims[ax]) for b in xs) \
        else sum((b.dims[ax] for b in xs[1:]), xs[0].dims[ax])
    out = e.output("Out", x0.dims[:ax] + [total] + x0.dims[ax + 1:], x0.ctype)
    pre, post = e.prod(x0.dims[:ax]), e.prod(x0.dims[ax + 1:])
    e.code(f"int64_t at = 0; const int64_t row = {e.mul(total, post)};")
    for b in xs:
        n = e.mul(b.dims[ax], post)
        e.code(f"{copy_block(out, b, pre, n)} at += {n};")


def emit_concat_grad(e, copy_block):
    """concat_grad for both targets: for each X@GRAD the op has, `copy_block(X@GRAD,
    Out@GRAD, pre, n)`, the target's C copying its [pre, n] blocks out of Out@GRAD's rows
    (`row` long) at column `at`."""
    if e.op.input("AxisTensor"):
        e.fail("the axis comes from a tensor")
    xs, d = e.inputs("X"), e.input("Out@GRAD")
    if not xs or any(b is None for b in xs):
        e.fail("absent inputs")
    x0 = xs[0]
    ax = e.attr("axis") % x0.ndim
    if ax == 0 and any(b.lod is not None for b in xs):
        e.fail("axis 0 over LoD inputs joins their LoDs (the interpreter does)")
    pre, post = e.prod(x0.dims[:ax]), e.prod(x0.dims[ax + 1:])
    e.code(f"int64_t at = 0; const int64_t row = {e.prod(d.dims[ax:])};")
    for i, b in enumerate(xs):
        n = e.mul(b.dims[ax], post)
        if e.output_var("X@GRAD", i) not in (None, "@EMPTY@"):
            g = e.output("X@GRAD", b.dims, d.ctype, i=i, lod_from=b)
            e.code(copy_block(g, d, pre, n))
        e.code(f"at += {n};")

"""C++ emitters of the shape ops (reshape2, transpose2, squeeze2, unsqueeze2, flatten2,
flatten_contiguous_range, flatten: a copy into Out's dims, or fl::transpose) and of shape and size,
whose outputs are values compiled code knows (known_values.py)."""
import numpy as np

from ....errors import ProgramError, ShapeError
from ....ops.shape_ops import transpose_perm
from .. import register
from ..checks import dense_only, same_dim
from ..known_values import set_known_values


# the ops whose shape rule only picks, permutes and inserts literal 1s (squeeze2 once its
# emitter has made sure each dim it may drop is a literal): applied to X's Dims themselves
# it is exact for run-time dims too, however many
REARRANGING = frozenset({"transpose2", "squeeze2", "unsqueeze2"})


@register("flatten2", "cpu")
@register("flatten_contiguous_range", "cpu")
@register("reshape2", "cpu")
@register("transpose2", "cpu")
@register("unsqueeze2", "cpu")
def shape_op(e):
    """A copy into Out's dims (out_dims)."""
    if any(e.op.input(s.name) for s in e.opdef.inputs[1:]):
        e.fail("the shape comes from a tensor")
    x = e.input("X")
    dims = out_dims(e, x)
    # the LoD stays when the rows do (the kernel's rule); where only run time can say,
    # a run that keeps them runs interpreted
    keep_lod = e.opdef.keeps_lod and x.has_lod and x.ndim > 0 and len(dims) > 0
    if keep_lod and dims[0] != x.dims[0]:
        if not (e.is_lit(dims[0]) and e.is_lit(x.dims[0])):
            e.check(f"{dims[0]} == {x.dims[0]}",
                    f"{e.op.type}: keeps X's rows and so its LoD")
        keep_lod = False
    out = e.output("Out", dims, x.ctype, lod_from=x if keep_lod else False)
    if e.has_output("XShape"):
        e.output("XShape", ["0"] + x.dims, x.ctype, lod_from=False)
    if e.op.type == "transpose2":
        _transpose(e, x, out, transpose_perm(e.attr("axis"), x.ndim))
    else:
        e.copy_code(out, x, f"std::memcpy({out}, {x}, sizeof(*{x}) * {x.numel()});")


def out_dims(e, x):
    """Out's dims: the shape rule applied to X's dims with the symbolic ones as -1 (which
    also checks the attributes), then either to the Dims themselves (a REARRANGING op) or
    the one -1 left (if any) taken as numel(X) / the product of the others."""
    known = [int(d) if e.is_lit(d) else -1 for d in x.dims]
    try:
        shape = e.opdef.out_shape(known, e.attrs.__getitem__)
        if e.op.type in REARRANGING:
            return list(e.opdef.out_shape(list(x.dims), e.attrs.__getitem__))
    except (ShapeError, ProgramError) as exc:
        e.fail(str(exc))
    dims = [str(d) for d in shape]
    if shape.count(-1) > 1:
        e.fail("more than one unknown dim")
    if -1 in shape:
        rest = e.prod([d for d in dims if d != "-1"])
        # a size the rule cannot split: interpreted, where the kernel names the shapes
        e.check(f"{rest} == 0 || {x.numel()} % {rest} != 0",
                f"{e.op.type}: X's size does not split into {shape}")
        dims[shape.index(-1)] = x.numel() // rest
    return dims


def _transpose(e, x, out, perm):
    """Out = X with its dims permuted by `perm` (fl::transpose)."""
    e.code(f"const int64_t dims[] = {{{', '.join(map(str, x.dims))}}}; const int perm[] = "
           f"{{{', '.join(map(str, perm))}}}; fl::transpose({x}, {out}, {x.ndim}, dims, perm);")


@register("flatten2_grad", "cpu")
@register("flatten_contiguous_range_grad", "cpu")
@register("reshape2_grad", "cpu")
@register("squeeze2_grad", "cpu")
@register("unsqueeze2_grad", "cpu")
def shape_op_grad(e):
    xshape, d = e.input("XShape"), e.input("Out@GRAD")
    g = e.output("X@GRAD", xshape.dims[1:], d.ctype, lod_from=False)
    e.copy_code(g, d, f"std::memcpy({g}, {d}, sizeof(*{d}) * {d.numel()});")


@register("transpose2_grad", "cpu")
def transpose2_grad(e):
    xshape, d = e.input("XShape"), e.input("Out@GRAD")
    inv = [int(i) for i in np.argsort(transpose_perm(e.attr("axis"), d.ndim))]
    g = e.output("X@GRAD", xshape.dims[1:], d.ctype, lod_from=False)
    _transpose(e, d, g, inv)


@register("squeeze2", "cpu")
def squeeze2(e):
    x = e.input("X")
    axes = [int(a) % max(x.ndim, 1) for a in e.attr("axes")] or range(x.ndim)
    if any(not e.is_lit(x.dims[a]) for a in axes):
        e.fail("whether a dim it may squeeze is 1 is known only at run time")
    shape_op(e)


@register("shape", "cpu")
def shape_(e):
    """Input's dims, which compiled code knows (known values for the ops that take a
    shape from Out: known_values.py)."""
    x = e.input("Input")
    dense_only(e, x)
    out = e.output("Out", [str(x.ndim)], "int32_t")
    e.code(" ".join(f"{out}[{k}] = (int32_t)({d});" for k, d in enumerate(x.dims)))
    set_known_values(e, out, x.dims)


@register("size", "cpu")
def size(e):
    x = e.input("Input")
    dense_only(e, x)
    out = e.output("Out", [], "int64_t")
    e.code(f"{out}[0] = (int64_t)({x.numel()});")
    set_known_values(e, out, [x.numel()])


@register("flatten", "cpu")
def flatten(e):
    """Out = X as [prod(dims[:axis]), prod(dims[axis:])], a copy; X's LoD kept where dim 0
    is (the kernel's rule; where only run time can say, a run keeping it runs interpreted)."""
    x = e.input("X")
    dense_only(e, x)
    axis = e.attr("axis")
    if not 0 <= axis <= x.ndim:
        e.fail(f"axis {axis} for X{x.dims}")
    dims = [e.prod(x.dims[:axis]), e.prod(x.dims[axis:])]
    keep = x.has_lod and x.ndim > 0
    if keep and str(dims[0]) != str(x.dims[0]):
        if not (e.is_lit(dims[0]) and e.is_lit(x.dims[0])):
            e.check(f"{dims[0]} == {x.dims[0]}", "flatten: keeps X's rows and so its LoD")
        keep = False
    out = e.output("Out", dims, x.ctype, lod_from=x if keep else False)
    e.copy_code(out, x, f"std::memcpy({out}, {x}, sizeof(*{x}) * {x.numel()});")


@register("flatten_grad", "cpu")
def flatten_grad(e):
    x, d = e.input("X"), e.input("Out@GRAD")
    dense_only(e, x, d)
    same_dim(e, d.numel(), x.numel(), "Out@GRAD is not X's size")
    g = e.output("X@GRAD", x.dims, d.ctype)
    e.copy_code(g, d, f"std::memcpy({g}, {d}, sizeof(*{d}) * {d.numel()});")

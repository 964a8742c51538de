"""CUDA emitters of sgd and adam, dense and SelectedRows (runtime/cuda_ops.h)."""
from .. import register
from ..optimizer import adam_eps_scaled, adam_operands, update_operands


@register("sgd", "cuda")
def sgd(e):
    """Dense: one thread per element. SelectedRows: one thread per element of the
    gradient's rows, atomically added (duplicate rows accumulate, as the CPU's in-place
    loop; the order of duplicates' adds may differ)."""
    p, _, g, lr = update_operands(e)
    if g.rows is not None:
        e.code(f"fl::cu::sgd_rows({p}, {p.dims[0]}, {lr}, {g}, {g.rows}, {g.dims[0]}, "
               f"{e.prod(p.dims[1:])});")
        return
    e.code(f"fl::cu::sgd_dense({p}, {lr}, {g}, {p.numel()});")


@register("adam", "cuda")
def adam(e):
    """Adam, one thread per element (fl::adam_elem, the C++ target's arithmetic), then the
    beta powers in a second launch. A SelectedRows Grad is merged into a dense one first
    (duplicates added atomically, each row present marked): lazy_mode steps only marked
    rows, else every row (g = 0 where absent); an empty Grad steps nothing, as the CPU
    kernel. Epsilon as the CPU targets add it: Fluid 1.8's, or Paddle 2.1+'s scaled one for an
    op Paddle >= 2.1 wrote."""
    p, m1, m2, g, b1p, b2p, lr, (b1, b2, eps) = adam_operands(e)
    grad, seen, width = g, "nullptr", e.prod(p.dims[1:])
    if g.rows is not None:
        grad, marks = e.scratch(p.dims), e.scratch([p.dims[0]], "int64_t")
        e.code(f"if ({g.dims[0]} == 0) return 0;")
        e.code(f"fl::cu::merge_rows({g}, {g.rows}, {g.dims[0]}, {width}, {grad}, {marks}, "
               f"{p.dims[0]});")
        if e.attr("lazy_mode"):
            seen = str(marks)
    advance = "false" if e.attr("use_global_beta_pow") else "true"
    scaled = "true" if adam_eps_scaled(e) else "false"
    e.code(f"fl::cu::adam({p}, {m1}, {m2}, {grad}, {p.numel()}, {lr}, {b1p}, {b2p}, {b1}, "
           f"{b2}, {eps}, {scaled}, {seen}, {width}, {advance});")

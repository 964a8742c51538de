"""C++ emitters of Fluid 1.x's CTR ops (ops/ctr.py): cvm and data_norm and their gradients,
float32, in the kernels' arithmetic (one float operation at a time, in their order; column
sums row by row, as numpy's axis-0 sum of a row-major matrix)."""
import numpy as np

from ...dim import dim
from .. import register
from ..checks import check_dims, dense_only, same_dim


# ---- cvm


def _cvm_operands(e):
    """X as [rows, D] (C expressions) for cvm(_grad): float, dense, D >= 2 (checked at run
    time where symbolic: a narrower X runs interpreted, where the kernel fails)."""
    x = e.input("X")
    e.require_float(x)
    dense_only(e, x)
    if x.ndim < 1:
        e.fail("X is 0-D")
    d = x.dims[-1]
    if e.is_lit(d) and int(d) < 2:
        e.fail(f"X's last dim {d} holds no show and click columns")
    if not e.is_lit(d):
        e.check(f"{d} < 2", "cvm: X's last dim holds no show and click columns")
    return x, e.prod(x.dims[:-1]), d


@register("cvm", "cpu")
def cvm(e):
    """use_cvm: Y = X with columns 0, 1 made log(show + 1), log(click + 1) - log(show + 1)
    (float logs, as numpy's); else Y = X without them."""
    x, rows, d = _cvm_operands(e)
    if e.attr("use_cvm"):
        y = e.output("Y", x.dims)
        e.code(f"for (int64_t r = 0; r < {rows}; ++r) {{ const float* a = {x} + r * {d}; "
               f"float* b = {y} + r * {d}; const float s = std::log(a[0] + 1.0f); "
               f"b[0] = s; b[1] = std::log(a[1] + 1.0f) - s; for (int64_t k = 2; k < {d}; "
               f"++k) b[k] = a[k]; }}")
        return
    w = dim(d) - 2
    y = e.output("Y", list(x.dims[:-1]) + [w])
    e.code(f"for (int64_t r = 0; r < {rows}; ++r) std::memcpy({y} + r * {w}, {x} + r * {d} "
           f"+ 2, sizeof(float) * {w});")


@register("cvm_grad", "cpu")
def cvm_grad(e):
    """X@GRAD: Y@GRAD on the embedding columns; the show and click columns the CVM values
    (each row's two, as the kernel's reshape reads them)."""
    x, rows, d = _cvm_operands(e)
    c, dy = e.input("CVM"), e.input("Y@GRAD")
    e.require_float(c, dy)
    dense_only(e, c, dy)
    use = e.attr("use_cvm")
    check_dims(e, dy, x.dims if use else list(x.dims[:-1]) + [dim(d) - 2], "Y")
    same_dim(e, c.numel(), e.mul(rows, 2), "CVM holds two values a row of X")
    dx = e.output("X@GRAD", x.dims)
    w, skip = (d, 2) if use else (dim(d) - 2, 0)
    e.code(f"for (int64_t r = 0; r < {rows}; ++r) {{ float* g = {dx} + r * {d}; "
           f"g[0] = {c}[2 * r]; g[1] = {c}[2 * r + 1]; std::memcpy(g + 2, {dy} + r * {w} + "
           f"{skip}, sizeof(float) * ({d} - 2)); }}")


# ---- data_norm

_STATS = ("BatchSize", "BatchSum", "BatchSquareSum")


def _f32(e, v):
    """A float attribute as the kernel's float32 of it (rounded once, from the double)."""
    return e.literal(float(np.float32(v)))


class _DataNorm:
    """data_norm(_grad)'s operands: X [N, C] float (the kernel reads it so), the statistics
    and scale_w / bias of C values each (checked), and the C of `live(i, k)`: whether
    element (i, k) is in a used slot (slot_dim > 0: its slot's first value is not within
    1e-7 of zero, compared in float as numpy compares a float32 array with 1e-7)."""

    def __init__(self, e, stats):
        x = self.x = e.input("X")
        e.require_float(x)
        dense_only(e, x)
        if x.ndim != 2:
            e.fail(f"X{x.dims} is not [N, C]")
        self.n, self.c = x.dims
        self.shift = bool(e.attr("enable_scale_and_shift"))
        self.stats = [e.input(s) for s in stats]
        self.wb = [e.input(s) for s in ("scale_w", "bias")] if self.shift else []
        if self.shift and None in self.wb:
            e.fail("enable_scale_and_shift without scale_w and bias")
        for b, name in zip(self.stats + self.wb, list(stats) + ["scale_w", "bias"]):
            if b is None:
                e.fail(f"no {name}")
            e.require_float(b)
            dense_only(e, b)
            same_dim(e, b.numel(), self.c, f"{name} holds a value per channel of X")
        sd = int(e.attr("slot_dim"))
        self.live = "true"
        if sd > 0:
            same_dim(e, dim(self.c) % sd, 0, f"slot_dim {sd} divides X's channels")
            self.live = (f"[&] {{ const float f = {x}[i * {self.c} + k / {sd} * {sd}]; "
                         f"return !(f > -1e-7f && f < 1e-7f); }}()")


@register("data_norm", "cpu")
def data_norm(e):
    """Means = BatchSum / BatchSize, Scales = sqrt(BatchSize / BatchSquareSum) (float);
    Y = (X - Means) * Scales (* scale_w + bias), 0 in unused slots."""
    p = _DataNorm(e, _STATS)
    x, c = p.x, p.c
    size, total, square = p.stats
    means, scales = (e.output(s, [c], lod_from=False) if e.has_output(s) else e.scratch([c])
                     for s in ("Means", "Scales"))
    y = e.output("Y", x.dims)
    v = "v = v * w[k] + b[k]; " if p.shift else ""
    wb = f"const float* w = {p.wb[0]}; const float* b = {p.wb[1]}; " if p.shift else ""
    e.code(f"for (int64_t k = 0; k < {c}; ++k) {{ {means}[k] = {total}[k] / {size}[k]; "
           f"{scales}[k] = std::sqrt({size}[k] / {square}[k]); }}")
    e.code(f"{{ {wb}for (int64_t i = 0; i < {p.n}; ++i) for (int64_t k = 0; k < {c}; ++k) "
           f"{{ float v = ({x}[i * {c} + k] - {means}[k]) * {scales}[k]; {v}"
           f"{y}[i * {c} + k] = {p.live} ? v : 0.0f; }} }}")


def _grad_buf(e, slot, c):
    return e.output(slot, [c], lod_from=False) if e.has_output(slot) else e.scratch([c])


def _in_place(e, slots):
    """The statistics data_norm_grad updates in place: each output must be its input."""
    for s in slots:
        if e.has_output(s):
            if e.op.output(s) != e.op.input(s):
                e.fail(f"{s} is not updated in place")
            e.output(s, e.input(s).dims, lod_from=False)
    return [s for s in slots if e.has_output(s)]


@register("data_norm_grad", "cpu")
def data_norm_grad(e):
    """X@GRAD, scale_w@GRAD, bias@GRAD as the kernel's, and the batch's statistics (the
    rows counted, their mean, the mean squared deviation from Means plus epsilon, per
    channel; with slot_dim only the used slots' rows) as the statistics' "gradients",
    folded in place into the statistics: stat = stat * summary_decay_rate + grad."""
    present = [s for s in _STATS if e.op.input(s)]
    p = _DataNorm(e, present)
    x, n, c = p.x, p.n, p.c
    dy, scales, means = e.input("Y@GRAD"), e.input("Scales"), e.input("Means")
    e.require_float(dy, scales, means)
    dense_only(e, dy, scales, means)
    check_dims(e, dy, x.dims, "Y")
    for b, name in ((scales, "Scales"), (means, "Means")):
        same_dim(e, b.numel(), c, f"{name} holds a value per channel of X")
    updated = _in_place(e, present)
    dsize, dsum, dsq = (_grad_buf(e, s + "@GRAD", c) for s in _STATS)
    dx = e.output("X@GRAD", x.dims) if e.has_output("X@GRAD") else None
    dw, db = (_grad_buf(e, s + "@GRAD", c) for s in ("scale_w", "bias")) if p.shift \
        else (None, None)
    cnt = e.scratch([c], "int64_t")
    zero = " ".join(f"std::memset({b}, 0, {b.nbytes()});" for b in (dsum, dsq, cnt, dw, db)
                    if b is not None)
    body = f"const float g = {dy}[i * {c} + k], dev = {x}[i * {c} + k] - {means}[k]; "
    if dx is not None:
        body += (f"{dx}[i * {c} + k] = on ? g * {scales}[k] * {p.wb[0]}[k] : 0.0f; "
                 if p.shift else f"{dx}[i * {c} + k] = g * {scales}[k]; ")
    on = (f"{cnt}[k] += 1; {dsum}[k] += {x}[i * {c} + k]; {dsq}[k] += dev * dev; ")
    if p.shift:
        on += f"{db}[k] += g; {dw}[k] += dev * {scales}[k] * g; "
    e.code(f"{zero} for (int64_t i = 0; i < {n}; ++i) for (int64_t k = 0; k < {c}; ++k) {{ "
           f"const bool on = {p.live}; {body}if (on) {{ {on}}} }}")
    eps = _f32(e, e.attr("epsilon"))
    if p.live == "true":        # every row counts, N of them
        fin = (f"{dsize}[k] = (float){n}; {dsq}[k] = {dsq}[k] + {dsize}[k] * {eps};")
    else:
        fin = (f"const float m = (float){cnt}[k]; if ({cnt}[k] >= 1) {{ {dsum}[k] = "
               f"{dsum}[k] / m; {dsq}[k] = {dsq}[k] / m + m * {eps}; {dsize}[k] = 1.0f; }} "
               f"else {dsize}[k] = m;")
    decay = _f32(e, e.attr("summary_decay_rate"))
    grads = dict(zip(_STATS, (dsize, dsum, dsq)))
    fold = " ".join(f"{e.input(s)}[k] = {e.input(s)}[k] * {decay} + {grads[s]}[k];"
                    for s in updated)
    e.code(f"for (int64_t k = 0; k < {c}; ++k) {{ {fin} {fold} }}")

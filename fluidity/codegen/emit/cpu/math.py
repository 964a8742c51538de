"""C++ emitters of the arithmetic ops: scale, mul, matmul, bmm, sum, mean, fc and their
gradients (BLAS gemms; sums in numpy's order)."""
from .. import register
from ..broadcast import broadcast_code, broadcast_plan
from ..checks import check_dims
from ..math import emit_fc_gemm, emit_mul, fc_grad_operands, mul_grad_operands, sum_inputs


def scale_body(e):
    """Scale's arithmetic: (elements, the statements computing Out[i]). float32 in float32
    and float64 in float64 (as numpy, the attributes being Python floats); integers in
    double, truncated back (numpy's float64 product, astype)."""
    if e.op.input("ScaleTensor"):
        e.fail("the scale comes from a tensor")
    x = e.input("X")
    s, b = float(e.attr("scale")), float(e.attr("bias"))
    if x.ctype == "float":
        s, b, t = e.literal(s), e.literal(b), "float"
    elif x.ctype == "bool":
        e.fail("X is bool")
    else:
        s, b, t = repr(s), repr(b), "double"
    out = e.output("Out", x.dims, x.ctype)
    if e.attr("bias_after_scale"):
        expr = f"v * {s} + {b}" if float(e.attr("bias")) else f"v * {s}"
    else:
        expr = f"(v + {b}) * {s}"
    return x.numel(), f"const {t} v = ({t}){x}[i]; {out}[i] = ({x.ctype})({expr});"


def dense_sum_body(e, xs):
    """sum of same-shaped float tensors: (elements, the statement storing Out[i]), added left
    to right as the kernel adds."""
    e.require_float(*xs)
    for b in xs[1:]:
        e.same_dims(xs[0], b)
    out = e.output("Out", xs[0].dims, lod_from=xs[0])
    terms = " + ".join(f"{b}[i]" for b in xs)
    return xs[0].numel(), f"{out}[i] = {terms};"


def fc_epilogue(b, relu, col):
    """fc's bias and relu on the float `v` of Out's column `col` (a C expression), as C
    statements."""
    return (f"v = v + {b}[{col}]; " if b is not None else "") + \
        ("v = v > 0 ? v : 0.0f; " if relu else "")


# --- compiled matmul: every form numpy's matmul takes, as BLAS gemms ----------------------------
_C_BOOL = {True: "true", False: "false"}


def _emit_matmul(e, tx, ty, alpha):
    """Out = alpha * op(X) @ op(Y): one gemm when X's batch folds into its rows, else one
    per matrix of Out's (broadcast) batch."""
    x, y = e.input("X"), e.input("Y")
    e.require_float(x, y)
    p = MatmulPlan(e, x, y, tx, ty)
    out = e.output("Out", p.out_dims)
    al, T = e.literal(float(alpha)), _C_BOOL
    if p.fold:
        e.code(f"fl::gemm(false, {T[p.ty]}, {p.m_all}, {p.n}, {p.k}, {al}, {x}, {p.k}, {y}, "
               f"{p.ldy}, 0.0f, {out}, {p.n});")
        return
    e.code(p.each_batch(f"fl::gemm({T[p.tx]}, {T[p.ty]}, {p.m}, {p.n}, {p.k}, {al}, {x} + xo, "
                        f"{p.ldx}, {y} + yo, {p.ldy}, 0.0f, {out} + oo, {p.n});"))


def _emit_matmul_grad(e, tx, ty, alpha):
    """With a = op(X) [M,K], b = op(Y) [K,N], d [M,N] per matrix: dX = d b^T (or its
    transpose), dY = a^T d (or its transpose), each one gemm over the stored matrices; an
    operand reused across Out's batch gets its gradient summed there (gemm's beta = 1 over a
    zeroed buffer), as the kernel's reduce_to_shape sums it."""
    x, y, d = e.input("X"), e.input("Y"), e.input("Out@GRAD")
    e.require_float(x, y, d)
    p = MatmulPlan(e, x, y, tx, ty)
    check_dims(e, d, p.out_dims, "Out")
    al, T = e.literal(float(alpha)), _C_BOOL
    m, k, n = (p.m_all if p.fold else p.m), p.k, p.n
    xo, yo, do = ("", "", "") if p.fold else (" + xo", " + yo", " + oo")
    if p.tx:
        dx_call = (f"fl::gemm({T[p.ty]}, true, {k}, {m}, {n}, {al}, {y}{yo}, {p.ldy}, "
                   f"{d}{do}, {n}, BETA, DX{xo}, {m});")
    else:
        dx_call = (f"fl::gemm(false, {T[not p.ty]}, {m}, {k}, {n}, {al}, {d}{do}, {n}, "
                   f"{y}{yo}, {p.ldy}, BETA, DX{xo}, {k});")
    if p.ty:
        dy_call = (f"fl::gemm(true, {T[p.tx]}, {n}, {k}, {m}, {al}, {d}{do}, {n}, {x}{xo}, "
                   f"{p.ldx}, BETA, DY{yo}, {k});")
    else:
        dy_call = (f"fl::gemm({T[not p.tx]}, false, {k}, {n}, {m}, {al}, {x}{xo}, {p.ldx}, "
                   f"{d}{do}, {n}, BETA, DY{yo}, {n});")
    for slot, buf, call, operand in (("X@GRAD", x, dx_call, 1), ("Y@GRAD", y, dy_call, 2)):
        if not e.has_output(slot):
            continue
        g = e.output(slot, buf.dims)
        call = call.replace("DX", g.name).replace("DY", g.name)
        if p.fold:
            e.code(call.replace("BETA", "0.0f"))
        elif p.broadcasts(operand):
            e.code(f"std::memset({g}, 0, sizeof(float) * {g.numel()});")
            e.code(p.each_batch(call.replace("BETA", "1.0f")))
        else:
            e.code(p.each_batch(call.replace("BETA", "0.0f")))


def _emit_rows_concat(e, xs):
    """sum of SelectedRows (a sparse gradient's parts): Out's row ids and values are the
    inputs', concatenated in order, as the kernel; a mix with dense inputs is compiled when
    one SelectedRows comes first (_emit_rows_then_dense)."""
    if any(b.rows is None for b in xs):
        return _emit_rows_then_dense(e, xs)
    e.require_float(*xs)
    for b in xs[1:]:
        if b.ndim != xs[0].ndim:
            e.fail("inputs' rows differ in rank")
        for a, c in zip(b.dims[1:], xs[0].dims[1:]):
            if a != c:
                if e.is_lit(a) and e.is_lit(c):
                    e.fail(f"inputs' rows differ ({a} vs {c})")
                e.check(f"{a} != {c}", "sum: the inputs' rows differ in shape")
    width = e.prod(xs[0].dims[1:])
    n = sum((b.dims[0] for b in xs[1:]), xs[0].dims[0])
    out = e.output_rows("Out", n, xs[0].dims[1:], xs[0].height)
    e.code("int64_t at = 0;")
    for b in xs:
        e.code(f"std::memcpy({out.rows} + at, {b.rows}, sizeof(int64_t) * {b.dims[0]}); "
               f"std::memcpy({out} + at * {width}, {b}, sizeof(float) * {b.numel()}); "
               f"at += {b.dims[0]};")


def _emit_rows_then_dense(e, xs):
    """sum(SelectedRows, dense, ...), a sparse gradient and its L2 decay: Out dense, the
    rows added into zeros in order (the kernel's to_dense, np.add.at), then each dense input
    added left to right. Another order (a second SelectedRows, added as the kernel's
    _add_rows decides from its data) is not compiled."""
    sr, dense = xs[0], xs[1:]
    if sr.rows is None or any(b.rows is not None for b in dense):
        e.fail("SelectedRows and dense inputs mixed (compiled: one SelectedRows first)")
    e.require_float(*xs)
    for b in dense[1:]:
        e.same_dims(dense[0], b)
    d = dense[0]
    if d.ndim != sr.ndim:
        e.fail(f"the dense inputs are {d.ndim}-D, the SelectedRows' rows {sr.ndim}-D")
    e.check(f"{sr.height} != {d.dims[0]}", "sum: the SelectedRows' height is not the dense "
            "inputs' rows")
    for a, c in zip(sr.dims[1:], d.dims[1:]):
        if e.is_lit(a) and e.is_lit(c) and int(a) != int(c):
            e.fail(f"inputs' rows differ ({a} vs {c})")
        e.check(f"{a} != {c}", "sum: the inputs' rows differ in shape")
    out = e.output("Out", d.dims, lod_from=False)
    width, n = e.prod(d.dims[1:]), d.numel()
    e.code(f"std::memset({out}, 0, {out.nbytes()});")
    e.code(f"for (int64_t r = 0; r < {sr.dims[0]}; ++r) {{ const int64_t id = {sr.rows}[r]; "
           f"if (id < 0 || id >= {d.dims[0]}) return fl::fail(err, {e.k}, \"sum: a row id "
           f"of the SelectedRows input is out of range of its height\"); "
           f"for (int64_t j = 0; j < {width}; ++j) {out}[id * {width} + j] += "
           f"{sr}[r * {width} + j]; }}")
    terms = " + ".join(f"{b}[i]" for b in dense)
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {out}[i] = {out}[i] + {terms};")


@register("scale", "cpu")
def scale(e):
    n, body = scale_body(e)
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ {body} }}")


@register("mul", "cpu")
def mul(e):
    return emit_mul(e, "fl::gemm")


def refuse_transposed_vectors(fwd, e):
    """matmul (v1) transposes a 1-D operand (Paddle 1.8's rule, the kernel's); the compiled
    form reads 1-D operands as numpy does: such an op runs interpreted."""
    if getattr(fwd, "fluid18_vectors", False) and any(
            e.attr(a) and len(e.op.input(s)) and e.input(s).ndim == 1
            for a, s in ((fwd.tx_attr, "X"), (fwd.ty_attr, "Y"))):
        e.fail("a transposed 1-D operand (Paddle 1.8's vector rule)")


@register("matmul", "cpu")
@register("matmul_v2", "cpu")
def matmul_base(e):
    if e.attrs.get("head_number", 1) != 1:
        e.fail("head_number != 1")
    refuse_transposed_vectors(e.opdef, e)
    _emit_matmul(e, e.attr(e.opdef.tx_attr), e.attr(e.opdef.ty_attr), e.attrs.get("alpha", 1.0))


@register("sum", "cpu")
def sum_(e):
    xs = sum_inputs(e)
    if any(b.rows is not None for b in xs):
        return _emit_rows_concat(e, xs)
    n, body = dense_sum_body(e, xs)
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {body}")


@register("mean", "cpu")
def mean(e):
    x = e.input("X")
    e.require_float(x)
    out = e.output("Out", [])
    n = x.numel()       # numpy's pairwise sum, then one float division: the same bits
    e.code(f"{out}[0] = fl::pairwise_sum({x}, {n}, 1) / (float)({n});")


@register("mul_grad", "cpu")
def mul_grad(e):
    x, y, d, m, k, n = mul_grad_operands(e)
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        e.code(f"fl::gemm(false, true, {m}, {k}, {n}, 1.0f, {d}, {n}, {y}, {n}, 0.0f, "
               f"{dx}, {k});")
    if e.has_output("Y@GRAD"):
        update = e.fused_update("Y@GRAD")     # after dX: dX reads Y
        if update is not None:
            e.code(f"fl::at_b_update({m}, {k}, {n}, {x}, {d}, {update[0]}, {update[1]});")
        else:
            dy = e.output("Y@GRAD", y.dims, lod_from=y)
            e.code(f"fl::at_b({m}, {k}, {n}, {x}, {d}, {dy});")


@register("fc", "cpu")
def fc(e):
    out, m, width, b, relu = emit_fc_gemm(e, "fl::gemm")
    if b is not None or relu:
        e.code(f"for (int64_t r = 0; r < {m}; ++r) for (int64_t j = 0; j < {width}; ++j) "
               f"{{ float v = {out}[r * {width} + j]; {fc_epilogue(b, relu, 'j')}"
               f"{out}[r * {width} + j] = v; }}")


@register("fc_grad", "cpu")
def fc_grad(e):
    x, w, b, out, dout, m, k, width = fc_grad_operands(e)
    d = dout
    if e.attr("activation_type") == "relu":
        d = e.scratch([m, width])
        e.code(f"for (int64_t i = 0; i < {e.mul(m, width)}; ++i) "
               f"{d}[i] = {dout}[i] * ({out}[i] > 0 ? 1.0f : 0.0f);")
    if e.has_output("Input@GRAD"):
        dx = e.output("Input@GRAD", x.dims, lod_from=x)
        e.code(f"fl::gemm(false, true, {m}, {k}, {width}, 1.0f, {d}, {width}, {w}, {width}, "
               f"0.0f, {dx}, {k});")
    if e.has_output("W@GRAD"):
        update = e.fused_update("W@GRAD")     # after Input@GRAD: it reads W
        if update is not None:
            e.code(f"fl::at_b_update({m}, {k}, {width}, {x}, {d}, {update[0]}, "
                   f"{update[1]});")
        else:
            dw = e.output("W@GRAD", w.dims)
            e.code(f"fl::at_b({m}, {k}, {width}, {x}, {d}, {dw});")
    if e.has_output("Bias@GRAD") and b is not None:
        db = e.output("Bias@GRAD", b.dims)
        e.code(f"for (int64_t j = 0; j < {width}; ++j) {db}[j] = 0.0f; "
               f"for (int64_t r = 0; r < {m}; ++r) for (int64_t j = 0; j < {width}; ++j) "
               f"{db}[j] += {d}[r * {width} + j];")


@register("matmul_grad", "cpu")
@register("matmul_v2_grad", "cpu")
def matmul_grad_base(e):
    if e.attrs.get("head_number", 1) != 1:
        e.fail("head_number != 1")
    refuse_transposed_vectors(e.opdef.fwd, e)
    _emit_matmul_grad(e, e.attr(e.opdef.fwd.tx_attr), e.attr(e.opdef.fwd.ty_attr),
                      e.attrs.get("alpha", 1.0))


@register("mean_grad", "cpu")
def mean_grad(e):
    x, d = e.input("X"), e.input("Out@GRAD")
    e.require_float(x, d)
    dx = e.output("X@GRAD", x.dims, lod_from=x)
    n = x.numel()
    e.code(f"const float g = {d}[0] / (float)std::max<int64_t>({n}, 1); "
           f"for (int64_t i = 0; i < {n}; ++i) {dx}[i] = g;")


@register("bmm", "cpu")
def bmm(e):
    return _emit_matmul(e, False, False, 1.0)


@register("bmm_grad", "cpu")
def bmm_grad(e):
    return _emit_matmul_grad(e, False, False, 1.0)


class MatmulPlan:
    """The geometry of compiled op(X) @ op(Y) as numpy's matmul sees it: a 1-D X is a row
    [1, K] and a 1-D Y a column [K, 1] (their transposes ignored, as the kernel ignores
    them), dims squeezed from Out after; batch dims broadcast (numpy's rule) and walked by
    fl::broadcast_each in units of whole matrices. `fold`: Y is one matrix and X is not
    transposed, so X's batch dims fold into its rows and the whole product (and each
    gradient) is one gemm."""

    def __init__(self, e, x, y, tx, ty):
        xd, yd = list(x.dims), list(y.dims)
        if not xd or not yd:
            e.fail("a 0-D operand")
        if len(xd) == 1:
            xd, tx = ["1"] + xd, False
        if len(yd) == 1:
            yd, ty = yd + ["1"], False
        self.tx, self.ty = tx, ty
        self.m, self.k = (xd[-1], xd[-2]) if tx else (xd[-2], xd[-1])
        k2, self.n = (yd[-1], yd[-2]) if ty else (yd[-2], yd[-1])
        if self.k != k2:
            if e.is_lit(self.k) and e.is_lit(k2):
                e.fail(f"inner dims {self.k} and {k2} differ")
            e.check(f"{self.k} != {k2}", f"{e.op.type}: inner dims differ")
        self.fold = not tx and len(yd) == 2
        if self.fold:
            self.batch, self.loops = xd[:-2], None
            self.m_all = e.mul(e.prod(xd[:-2]), self.m)
        else:
            self.batch, self.loops = broadcast_plan(e, xd[:-2], yd[:-2])
        self.out_dims = (self.batch + ([] if len(x.dims) == 1 else [self.m])
                         + ([] if len(y.dims) == 1 else [self.n]))
        if not self.out_dims:
            e.fail("1-D @ 1-D (a 0-D Out)")
        self.ldx = self.m if tx else self.k
        self.ldy = self.k if ty else self.n
        self.mk, self.kn, self.mn = e.mul(self.m, self.k), e.mul(self.k, self.n), \
            e.mul(self.m, self.n)

    def broadcasts(self, operand):
        """Whether X (1) or Y (2) is reused across Out's batch (its gradient then sums)."""
        return self.loops is not None and any(lp[operand] == "0" and lp[0] != "1"
                                              for lp in self.loops)

    def each_batch(self, call):
        """C++ running `call` (over xo, yo, oo: the offsets of one batch's matrices of X,
        Y and Out) for every matrix of Out's batch."""
        return broadcast_code(self.loops, f"const int64_t xo = ia * {self.mk}, yo = ib * "
                                          f"{self.kn}, oo = i * {self.mn}; {call}")

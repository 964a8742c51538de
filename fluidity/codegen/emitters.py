"""Which compiled form an op has: `rule_for(opdef)` returns its emitter or None (and None
cuts the compiled segment there, so a Python step runs the op; never a silent wrong answer).

An op class says how it compiles, with the op (ops never import this package):

* `emit = staticmethod(fn)`: `fn(e)` writes the op's C++ through an `Emit` (cir.py);
* `c_expr = "..."`: an elementwise op written as one C expression per element over the
  names x (input X), y (Y), o (Out) and d (Out@GRAD), with `{attr}` for attributes, e.g.
  `"x > 0 ? x : x * {alpha}"`; the output is the op's first output. Binary ops broadcast
  as the numpy kernels do (Paddle's `axis` rule lines up the lower-rank operand, then
  numpy's): a Y whose dims are one contiguous run of X's loops over (pre, n, post), any
  other pattern (Y over non-adjacent dims, X broadcast too) walks fl::broadcast_each. The
  inputs are
  float32 unless the class sets `c_any_type = True` (then any dtype, all inputs alike, each
  element loaded as its own C type); the output has X's type, or `c_out_type` ("bool" for
  comparisons).

For the "cuda" target an op class carries `cuda_emit = staticmethod(fn)` beside `emit`
(the same `Emit`, writing host code that launches kernels over device pointers, see
runtime/cuda_rt.h); a class with only `c_expr` gets a kernel made of that expression (one
definition of the math for both targets).
"""
from ..ops.common import broadcast_code, broadcast_plan, spans_contiguously
from .cir import NotCompilable, literal

# slot -> the name its element has in a c_expr
ELEMENT_NAMES = {"X": "x", "Y": "y", "Out": "o", "Out@GRAD": "d"}


def rule_for(opdef, target="cpu"):
    """The emitter of `opdef` for `target` ("cpu": C++; "cuda": codegen/cuda.py), or None
    when it has no compiled form there."""
    if target == "cuda":
        return cuda_rule(opdef)
    if target != "cpu":
        raise ValueError(f"code generator target must be 'cpu' or 'cuda', got {target!r}")
    emit = getattr(opdef, "emit", None)
    if emit is not None:
        return emit
    expr = getattr(opdef, "c_expr", None)
    if expr is not None:
        return lambda e: elementwise(e, expr)
    return None


def expand(expr, attrs):
    """`expr` with {attr} replaced by the attributes' C literals."""
    try:
        return expr.format(**{k: literal(v) for k, v in attrs.items()
                              if isinstance(v, (bool, int, float))})
    except KeyError as e:
        raise NotCompilable(f"c_expr names attribute {e}") from None


def element_operands(e, expr):
    """A c_expr op's operands for both targets: ({element name: Buf} of the inputs it has,
    X (or Out@GRAD, or the one input), Y or None, Out's C type, `expr` expanded)."""
    ins = {}
    for slot, name in ELEMENT_NAMES.items():
        if e.opdef.slot(slot) is not None and e.op.input(slot):
            ins[name] = e.input(slot)
    if not ins:
        e.fail("no input")
    if getattr(e.opdef, "c_any_type", False):
        types = {b.ctype for b in ins.values()}
        if len(types) > 1:
            e.fail(f"inputs of types {sorted(types)}: compiled for one type")
    else:
        e.require_float(*ins.values())
    x = ins.get("x") or ins.get("d") or next(iter(ins.values()))
    out_type = getattr(e.opdef, "c_out_type", None) or x.ctype
    return ins, x, ins.get("y"), out_type, expand(expr, e.attrs)


def elementwise(e, expr):
    ins, x, y, out_type, body = element_operands(e, expr)
    out_slot = e.opdef.outputs[0].name
    if y is not None and (y.ndim != x.ndim or any(a != b for a, b in zip(x.dims, y.dims))):
        if spans_contiguously(x.dims, y.dims, e.attrs.get("axis", -1)):
            return _broadcast(e, x, y, out_slot, out_type, body)
        return _broadcast_general(e, x, y, out_slot, out_type, body)
    for b in ins.values():
        if b is not x:
            e.same_dims(x, b)
    out = e.output(out_slot, x.dims, out_type)
    n = x.numel()
    loads = " ".join(f"const {b.ctype} {k} = {b}[i];" for k, b in ins.items())
    e.code(f"for (int64_t i = 0; i < {n}; ++i) {{ {loads} {out}[i] = {body}; }}")


def _broadcast(e, x, y, out_slot, out_type, body):
    """Out = f(X, Y) with Y spanning X's dims [a, b): loops over (pre, n, post)."""
    pre, n, post = e.span(x, y)
    out = e.output(out_slot, x.dims, out_type)
    t = x.ctype
    if post == "1":
        e.code(f"for (int64_t p = 0; p < {pre}; ++p) {{ const {t}* xr = {x} + p * {n}; "
               f"{out_type}* orow = {out} + p * {n}; for (int64_t j = 0; j < {n}; ++j) "
               f"{{ const {t} x = xr[j]; const {t} y = {y}[j]; orow[j] = {body}; }} }}")
    else:
        e.code(f"for (int64_t p = 0; p < {pre}; ++p) for (int64_t j = 0; j < {n}; ++j) {{ "
               f"const {t} y = {y}[j]; const int64_t base = (p * {n} + j) * {post}; "
               f"for (int64_t q = 0; q < {post}; ++q) {{ const {t} x = {x}[base + q]; "
               f"{out}[base + q] = {body}; }} }}")


def _broadcast_general(e, x, y, out_slot, out_type, body):
    """Out = f(X, Y) under any broadcast (either operand, any set of dims): one walk over
    Out with each operand's strides (0 where it broadcasts)."""
    dims, loops = broadcast_plan(e, x.dims, y.dims, e.attrs.get("axis", -1))
    out = e.output(out_slot, dims, out_type, lod_from=y if y.ndim > x.ndim else None)
    e.code(broadcast_code(loops, f"const {x.ctype} x = {x}[ia]; const {y.ctype} y = {y}[ib]; "
                                 f"{out}[i] = {body};"))


# --- the CUDA target (codegen/cuda.py) ---------------------------------------------------------
def cuda_rule(opdef):
    """The CUDA emitter of `opdef`, or None: its class's `cuda_emit`; else a kernel of its
    `c_expr`; else (an elementwise op's gradient) a kernel of its `c_dx`/`c_dy`."""
    emit = getattr(opdef, "cuda_emit", None)
    if emit is not None:
        return emit
    expr = getattr(opdef, "c_expr", None)
    if expr is not None:
        return lambda e: cuda_elementwise(e, expr)
    if getattr(opdef, "c_dx", None) and getattr(opdef, "c_dy", None):
        return lambda e: cuda_elementwise_grad(e, opdef.c_dx, opdef.c_dy)
    return None


def cuda_elementwise(e, expr):
    """Out = expr over x, y, o, d (emitters.elementwise's names), one thread per element;
    Y broadcast over one contiguous run of X's dims (pre, n, post)."""
    ins, x, y, out_type, body = element_operands(e, expr)
    out = e.output(e.opdef.outputs[0].name, x.dims, out_type)
    if y is not None and y.dims != x.dims:
        pre, n, post = e.span(x, y)
        loads = f"const {x.ctype} x = {x}[i]; const {y.ctype} y = {y}[(i / {post}) % {n}];"
    else:
        for b in ins.values():
            if b is not x:
                e.same_dims(x, b)
        loads = " ".join(f"const {b.ctype} {k} = {b}[i];" for k, b in ins.items())
    e.code(f"fl::cu::each({x.numel()}, [=] __device__ (int64_t i) {{ {loads} "
           f"{out}[i] = {body}; }});")


def cuda_elementwise_grad(e, c_dx, c_dy):
    """dX, dY of an elementwise binary op from its table's C forms: dX one thread per
    element; a broadcast Y's dY one thread per element of Y summing over the rest in the
    order the C++ target's loops add (rows first), so both round alike."""
    x, y, d = e.input("X"), e.input("Y"), e.input("Out@GRAD")
    o = e.input("Out") if e.op.input("Out") else None
    e.require_float(x, y, d, o)
    same = y.dims == x.dims
    pre, n, post = ("1", x.numel(), "1") if same else e.span(x, y)
    e.same_dims(x, d)
    load_o = f" const float o = {o}[i];" if o is not None else ""
    if e.has_output("X@GRAD"):
        dx = e.output("X@GRAD", x.dims, lod_from=x)
        e.code(f"fl::cu::each({x.numel()}, [=] __device__ (int64_t i) {{ const int64_t j = "
               f"(i / {post}) % {n}; const float x = {x}[i]; const float y = {y}[j]; "
               f"const float d = {d}[i];{load_o} {dx}[i] = {c_dx}; }});")
    if e.has_output("Y@GRAD"):
        dy = e.output("Y@GRAD", y.dims, lod_from=y)
        if same:
            e.code(f"fl::cu::each({x.numel()}, [=] __device__ (int64_t i) {{ const float x = "
                   f"{x}[i]; const float y = {y}[i]; const float d = {d}[i];{load_o} "
                   f"{dy}[i] = {c_dy}; }});")
        else:
            e.code(f"fl::cu::each({n}, [=] __device__ (int64_t j) {{ const float y = {y}[j]; "
                   f"float acc = 0.0f; for (int64_t p = 0; p < {pre}; ++p) for (int64_t q = 0; "
                   f"q < {post}; ++q) {{ const int64_t i = (p * {n} + j) * {post} + q; "
                   f"const float x = {x}[i]; const float d = {d}[i];{load_o} acc += {c_dy}; }} "
                   f"{dy}[j] = acc; }});")

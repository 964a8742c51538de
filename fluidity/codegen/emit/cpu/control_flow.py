"""C++ emitters of select_input and StaticRNN's rnn_memory_helper (the loops and branches of
while, conditional_block and recurrent are codegen/control.py's and recurrent.py's)."""
from ....core.names import EMPTY_VAR_NAME
from .. import register


@register("select_input", "cpu")
def select_input(e):
    """A copy of the chosen input (the branches of a compiled cond live in the arena);
    every input of one shape and type."""
    if not e.made_here("X"):     # a branch not taken leaves its value unset: Python's
        e.fail("its inputs come from outside the compiled code (a branch not taken "
               "leaves one unset)")
    xs, mask = e.inputs("X", maybe_unset=True), e.input("Mask")
    if mask.ctype not in ("int32_t", "int64_t") or mask.numel() not in ("1", 1):
        e.fail(f"Mask is {mask.ctype}{mask.dims}, not one integer")
    if len({b.ctype for b in xs}) != 1:
        e.fail("the inputs differ in type")
    if any(b.lod is not None for b in xs):
        e.fail("the inputs carry LoD")
    for b in xs[1:]:
        e.same_dims(xs[0], b)
    out = e.output("Out", xs[0].dims, xs[0].ctype, lod_from=False)
    cases = " ".join(f"case {k}: src = {b}; break;" for k, b in enumerate(xs))
    e.code(f"const {out.ctype}* src = nullptr; switch ((int64_t){mask}[0]) {{ {cases} "
           f"default: return fl::fail(err, {e.k}, \"select_input: Mask is out of range "
           f"[0, {len(xs)})\"); }}")
    e.code(f"std::memcpy({out}, src, {out.nbytes()});")


@register("rnn_memory_helper", "cpu")
def rnn_memory_helper(e):
    """Out = X (a StaticRNN step's hand-off of an output or new state)."""
    x = e.input("X")
    if x.rows is not None:
        e.fail("X is SelectedRows")
    out = e.output("Out", x.dims, x.ctype, lod_from=x)
    e.copy_code(out, x, f"std::memcpy({out}, {x}, {x.nbytes()});")


@register("rnn_memory_helper_grad", "cpu")
def rnn_memory_helper_grad(e):
    """X@GRAD = Out@GRAD. The kernel's zeros for a gradient nobody computed are not
    compiled: Out@GRAD must be a value this code makes (recurrent.py binds a StaticRNN's
    state gradients to zeros at the last step, as the kernel would give)."""
    names = e.op.input("Out@GRAD")
    if not names or names[0] == EMPTY_VAR_NAME or not e.made_here("Out@GRAD"):
        e.fail("Out@GRAD may be unset (the kernel's zeros are not compiled)")
    d = e.input("Out@GRAD")
    if d.rows is not None:
        e.fail("Out@GRAD is SelectedRows")
    g = e.output("X@GRAD", d.dims, d.ctype, lod_from=d)
    e.copy_code(g, d, f"std::memcpy({g}, {d}, {d.nbytes()});")

"""C++ emitter of select_input (the loops and branches of while and conditional_block are
codegen/control.py's)."""
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

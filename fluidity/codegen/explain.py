"""Which ops of a block run as native code and which as Python steps, and why."""
import re

from .lower import Lowering

_FUSED = re.compile(r"^fused into #\d+ \S+ \((\w+)\)$")
# ops that are the run's own input and output: the executor (or a standalone model's
# driver) does them around the compiled code, so they are neither native nor a Python step
# of the model's arithmetic
RUN_IO = ("feed", "fetch")


def explain_rows(program, block_id=0, keep=()):
    """[(op index, op type, where, why)] for block `block_id` of a ProgramView."""
    return Lowering(program, block_id, keep=keep).explain()


def format_explain(rows):
    """The rows as a table, under a count of the native segments, the Python steps and
    the feed/fetch ops (counted apart: a model compiled whole has no Python step), and of
    the ops each fusion pass fused."""
    segs = sorted({w for _, _, w, _ in rows if w != "python"})
    io = sum(1 for _, t, w, _ in rows if w == "python" and t in RUN_IO)
    py = sum(1 for _, t, w, _ in rows if w == "python" and t not in RUN_IO)
    head = (f"{len(rows)} ops: {len(rows) - py - io} in {len(segs)} native segment(s), "
            f"{py} as Python steps")
    if io:
        head += f", {io} feed/fetch (the run's own input and output)"
    lines = [head]
    fused = {}
    for _, _, _, why in rows:
        m = _FUSED.match(why)
        if m:
            fused[m.group(1)] = fused.get(m.group(1), 0) + 1
    if fused:
        lines.append("fusions: " + ", ".join(f"{p} ({n} op{'s' * (n > 1)})"
                                            for p, n in sorted(fused.items())))
    for i, t, where, why in rows:
        where = "feed/fetch" if where == "python" and t in RUN_IO else where
        lines.append(f"  #{i:<4d} {t:32s} {where:12s} {why}")
    return "\n".join(lines)

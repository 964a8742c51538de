"""Which ops of a block run as native code and which as Python steps, and why."""
import re

from .lower import Lowering

_FUSED = re.compile(r"^fused into #\d+ \S+ \((\w+)\)$")


def explain_rows(program, block_id=0, keep=()):
    """[(op index, op type, where, why)] for block `block_id` of a ProgramView."""
    return Lowering(program, block_id, keep=keep).explain()


def format_explain(rows):
    """The rows as a table, with a count of the native segments and the Python ops, and
    of the ops each fusion pass fused."""
    segs = sorted({w for _, _, w, _ in rows if w != "python"})
    py = sum(1 for _, _, w, _ in rows if w == "python")
    lines = [f"{len(rows)} ops: {len(rows) - py} in {len(segs)} native segment(s), "
             f"{py} as Python steps"]
    fused = {}
    for _, _, _, why in rows:
        m = _FUSED.match(why)
        if m:
            fused[m.group(1)] = fused.get(m.group(1), 0) + 1
    if fused:
        lines.append("fusions: " + ", ".join(f"{p} ({n} op{'s' * (n > 1)})"
                                            for p, n in sorted(fused.items())))
    for i, t, where, why in rows:
        lines.append(f"  #{i:<4d} {t:32s} {where:12s} {why}")
    return "\n".join(lines)

"""Lower one block of a program to compiled segments and Python ops, in three stages with
plain data between them:

1. segmentation (segment.py): the block's ops in order, each emitted into the open segment
   through the emitter registered for its type and the target (emit/), or cutting it with
   the reason it did not compile; fusion passes (fusion.py) are applied here;
2. the buffer plan of each segment (buffers.py): its outputs, and arena slots coloured by
   lifetime;
3. rendering (render.py): the target's source text of all segments.

Dims the desc knows are literals in the code (checked against the values at run time); -1
dims are read from the inputs, so one build serves every batch size and every LoD. An input
whose rank or literal dims differ from the desc's at run time makes the segment return
before it writes anything; the native plan then runs that segment's ops interpreted.

The calling convention of `fl_seg_N(int64_t* args, char* arena, int64_t cap, char* err)` is
runtime/segment_args.h's (codegen/abi.py in Python): a record per input, then per output.
Return 0 on success, 1 asking for a larger arena, 2 + op index (within the segment) with a
message in `err` when an op finds bad input, -1 for inputs of other shapes.
"""
from .targets import target as target_named
from .buffers import plan_buffers
from .render import render_source
from .segment import FusedOp, PythonOp, Segment, later_reads, segment_block


class Lowering:
    """One block lowered for `target` ("cpu": C++; "cuda": CUDA, see cuda.py; "c": plain C).
    `parts` lists, in block order, `PythonOp`s, `FusedOp`s and `Segment`s; `segments` the
    segments; `source` the translation unit of all segments; `created` the persistables a
    device segment makes; `fusions` {pass name: what it found}.

    keep: names whose values must leave a segment even if no later op reads them (fetch
    targets of the caller)."""

    def __init__(self, program, block_idx=0, keep=(), target="cpu"):
        spec = target_named(target)
        self.program, self.block_idx, self.target = program, block_idx, target
        self.block = program.block(block_idx)
        self.keep = set(keep)
        self.parts, self.created, self.fusions = segment_block(program, block_idx, self.keep,
                                                               spec)
        self.segments = [p for p in self.parts if isinstance(p, Segment)]
        after = later_reads(program, self.block.ops)
        for seg in self.segments:
            plan_buffers(seg, after[seg.last], self.keep, self.block)
        self.source = render_source(self.segments, spec.dialect, block_idx)

    @property
    def python_ops(self):
        return [p for p in self.parts if isinstance(p, PythonOp)]

    def explain(self):
        """[(block op index, op type, where: 'segment N' or 'python', why)] in block order."""
        where = {i: f"segment {seg.index}" for seg in self.segments for i, _ in seg.ops}
        ops, rows = self.block.ops, []
        for part in self.parts:
            if isinstance(part, PythonOp):
                rows.append((part.i, ops[part.i].type, "python", part.reason))
            elif isinstance(part, FusedOp):
                rows.append((part.i, ops[part.i].type, where.get(part.into, "?"),
                             f"fused into #{part.into} {ops[part.into].type} "
                             f"({part.fusion})"))
            else:
                rows += [(i, op.type, f"segment {part.index}", part.notes.get(i, ""))
                         for i, op in part.ops]
        return sorted(rows)

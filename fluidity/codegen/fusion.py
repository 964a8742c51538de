"""Fusions the lowering applies, each a named pass over the block's desc: it finds what may
be fused, and the segmenter (segment.py) applies it while it emits; explain() names the pass
beside every op it fused.

* `sgd_into_gradient`: an sgd update whose gradient the segment makes is applied by the op
  that makes it, in the same arithmetic (Param -= LearningRate * gradient), so the gradient
  never reaches memory; the sgd op is then not emitted.
"""
from ..core.dtypes import VarType
from ..ir.analysis import sub_block_vars


def _readers_writers(program, ops):
    readers, writers = {}, {}
    for i, op in enumerate(ops):
        for n in op.input_arg_names:
            readers.setdefault(n, []).append(i)
        for n in op.output_arg_names:
            writers.setdefault(n, []).append(i)
        for n in sub_block_vars(program, op):
            readers.setdefault(n, []).append(i)
    return readers, writers


def sgd_into_gradient(program, block, keep):
    """{gradient name: (sgd op index, Param, LearningRate)} of the sgd updates in `block`
    whose Grad (dense or SelectedRows) only that sgd reads, made by one op, where no op between
    that maker and the sgd touches Param or writes LearningRate, and nobody keeps the
    gradient (`keep`: fetched names): the maker may apply the update itself."""
    ops = block.ops
    readers, writers = _readers_writers(program, ops)
    out = {}
    for i, op in enumerate(ops):
        if op.type != "sgd" or op.input("MasterParam"):
            continue
        (g,), (p,), (lr,) = op.input("Grad"), op.input("Param"), op.input("LearningRate")
        v = block.find_var_recursive(g)
        makers = writers.get(g, [])
        if v is None or v.persistable or g in keep or \
                v.type not in (VarType.LOD_TENSOR, VarType.SELECTED_ROWS) \
                or readers.get(g) != [i] or len(makers) != 1 or op.output("ParamOut") != [p]:
            continue
        between = range(makers[0] + 1, i)
        touch_p = readers.get(p, []) + writers.get(p, [])
        if any(j in between for j in touch_p + writers.get(lr, [])):
            continue
        out[g] = (i, p, lr)
    return out


FUSIONS = {"sgd_into_gradient": sgd_into_gradient}

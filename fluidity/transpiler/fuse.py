"""Fusion passes over the IR (run on a forward program, before backward).

`fuse_embedding_seq_pool(program)`: every `lookup_table` whose output only a
`sequence_pool(SUM)` reads becomes one `fused_embedding_seq_pool` op (Paddle's op of that
name): no intermediate [ids, dim] tensor, one kernel instead of two, and a single grad op that
writes the table's (sparse) gradient directly. A CTR model with 26 slots loses 52 ops.

`fuse_embedding_seq_pool_concat(program)`: then a run of such ops over ONE table whose
outputs feed one `concat(axis=1)` side by side becomes one `fused_embedding_seq_pool_concat`
(Fluidity's op): one kernel call for all slots, its output already concatenated, and one
sparse gradient for the table instead of one per slot plus a `sum` of them. Paddle has no such
op: apply it to training programs, not to programs saved for Paddle.

`fuse_fc(program)`: mul + elementwise_add(bias) [+ relu] -> `fc` (see its docstring).

Each rewrites a ProgramView (the builder's Program is one) in place through `ir.rewrite`;
`ir.rewrite.on_copy(desc, pass_)` runs one as a pure function of descs.
"""
from .. import unique_name
from ..core.names import OpRole
from ..ir import rewrite


def _readers(block):
    readers = {}
    for op in block.ops:
        for n in op.input_arg_names:
            readers.setdefault(n, []).append(op)
    return readers


def fuse_embedding_seq_pool(program, skip_vars=()):
    """Rewrite lookup_table -> sequence_pool(SUM) pairs in the global block; returns how many
    pairs were fused. Variables in `skip_vars` (e.g. fetched embeddings) are left alone."""
    block = program.global_block()
    readers = _readers(block)
    skip = set(skip_vars)
    fused = 0
    for lookup in [op for op in block.ops if op.type == "lookup_table"]:
        emb = lookup.output("Out")[0]
        users = readers.get(emb, [])
        if emb in skip or len(users) != 1 or block.var(emb).persistable:
            continue
        pool = users[0]
        if pool.type != "sequence_pool" or pool.attr("pooltype").upper() != "SUM" or \
                lookup.attr("op_role") != OpRole.Forward:
            continue
        max_index = pool.output("MaxIndex")
        if any(readers.get(n) for n in max_index):
            continue
        rewrite.insert_op(block, pool.idx, "fused_embedding_seq_pool",
                          {"W": lookup.input("W"), "Ids": lookup.input("Ids")},
                          {"Out": pool.output("Out")},
                          {"combiner": "sum", "padding_idx": lookup.attr("padding_idx"),
                           "op_role": lookup.attr("op_role"),
                           "is_sparse": lookup.attr("is_sparse"),
                           "is_distributed": lookup.attr("is_distributed")})
        rewrite.remove_op(block, pool)
        rewrite.remove_op(block, lookup)
        rewrite.remove_vars(block, [emb] + max_index)
        fused += 1
    return fused


_SAME_ATTRS = ("padding_idx", "is_sparse", "is_distributed")


def _concat_axis_1(op, block):
    if op.type != "concat" or op.input("AxisTensor"):
        return False
    axis = op.attr("axis")
    if axis == 1:
        return True
    x = block.find_var_recursive(op.input("X")[0])
    return axis == -1 and x is not None and len(x.shape) == 2


def fuse_embedding_seq_pool_concat(program, skip_vars=()):
    """Rewrite, in the global block, each run (>= 2, side by side in a concat(axis=1)'s X) of
    fused_embedding_seq_pool outputs over the same table and attributes, read by nothing
    else, into one fused_embedding_seq_pool_concat; returns how many runs were fused. When
    the run is the whole of X, the fused op writes the concat's Out and the concat goes."""
    block = program.global_block()
    skip = set(skip_vars)
    producer = {op.output("Out")[0]: op for op in block.ops
                if op.type == "fused_embedding_seq_pool"}
    fused = 0
    readers = _readers(block)  # a rewrite only touches its own run's names: no refresh needed
    for concat in [op for op in block.ops if _concat_axis_1(op, block)]:
        xs = concat.input("X")

        def key(name):
            op = producer.get(name)
            if op is None or name in skip or block.var(name).persistable or \
                    len(readers.get(name, [])) != 1 or xs.count(name) != 1 or \
                    op.attr("combiner") != "sum" or op.attr("op_role") != OpRole.Forward:
                return None
            w = block.find_var_recursive(op.input("W")[0])
            if w is None or len(w.shape) != 2:
                return None
            return (op.input("W")[0],) + tuple(op.attr(a) for a in _SAME_ATTRS)

        runs, i = [], 0
        while i < len(xs):
            k, j = key(xs[i]), i + 1
            while k is not None and j < len(xs) and key(xs[j]) == k:
                j += 1
            if k is not None and j - i >= 2:
                runs.append((i, j))
            i = j
        if not runs:
            continue
        new_xs = list(xs)
        for i, j in reversed(runs):
            names = xs[i:j]
            ops = [producer[n] for n in names]
            first = ops[0]
            w = block.find_var_recursive(first.input("W")[0])
            whole = (i, j) == (0, len(xs))
            if whole:
                out = concat.output("Out")[0]
            else:
                out = unique_name.generate("fused_embedding_seq_pool_concat.out")
                rewrite.add_var(block, out, shape=[-1, w.shape[1] * len(names)],
                                dtype=w.dtype, lod_level=0)
            at = max(op.idx for op in ops)
            rewrite.insert_op(block, at + 1, "fused_embedding_seq_pool_concat",
                              {"W": first.input("W"),
                               "Ids": [op.input("Ids")[0] for op in ops]},
                              {"Out": [out]},
                              {"combiner": "sum", "op_role": first.attr("op_role"),
                               **{a: first.attr(a) for a in _SAME_ATTRS}})
            for op in ops:
                rewrite.remove_op(block, op)
            rewrite.remove_vars(block, names)
            new_xs[i:j] = [out]
            fused += 1
            if whole:
                rewrite.remove_op(block, concat)
            else:
                rewrite.set_inputs(concat, "X", new_xs)
    return fused


def _only_reader(readers, name, skip, block):
    users = readers.get(name, [])
    if name in skip or len(users) != 1 or block.var(name).persistable:
        return None
    return users[0]


def fuse_fc(program, skip_vars=()):
    """Paddle's fc_fuse_pass, for training too: in the global block, each forward
    `mul(X, W)` whose output only an `elementwise_add` of a 1-D bias over the trailing dim
    reads (and whose sum, optionally, only a `relu`) becomes one `fc` op (Paddle's op;
    `fc_grad` is Fluidity's). Run before backward. Returns how many were fused.

    Why: per layer, the bias add and relu become in-place passes over the matmul's output,
    and the backward does relu_grad, the bias sum and both matmuls in one op — 6 ops and 3
    temporaries fewer per layer."""
    block = program.global_block()
    skip = set(skip_vars)
    fused = 0
    readers = _readers(block)  # a rewrite only touches its own layer's names: no refresh needed
    for mul in [op for op in block.ops if op.type == "mul"]:
        if mul.attr("op_role") != OpRole.Forward or mul.attr("y_num_col_dims") != 1:
            continue
        w = block.find_var_recursive(mul.input("Y")[0])
        n = mul.attr("x_num_col_dims")
        pre = mul.output("Out")[0]
        add = _only_reader(readers, pre, skip, block)
        if w is None or len(w.shape) != 2 or add is None or add.type != "elementwise_add" or \
                add.input("X") != [pre]:
            continue
        b = block.find_var_recursive(add.input("Y")[0])
        out_rank = len(block.var(pre).shape)
        if b is None or not b.persistable or len(b.shape) != 1 or \
                add.attr("axis") not in (n, -1, out_rank - 1):
            continue
        out, ops, act = add.output("Out")[0], [mul, add], ""
        relu = _only_reader(readers, out, skip, block)
        if relu is not None and relu.type == "relu":
            ops.append(relu)
            out, act = relu.output("Out")[0], "relu"
        rewrite.insert_op(block, ops[-1].idx + 1, "fc",
                          {"Input": mul.input("X"), "W": mul.input("Y"), "Bias": add.input("Y")},
                          {"Out": [out]}, {"in_num_col_dims": n, "activation_type": act,
                                           "op_role": mul.attr("op_role")})
        gone = [pre] + ([add.output("Out")[0]] if act else [])
        for op in ops:
            rewrite.remove_op(block, op)
        rewrite.remove_vars(block, gone)
        fused += 1
    return fused

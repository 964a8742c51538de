"""Losses over many classes that touch only a few rows of the class table per example:
nce (noise-contrastive estimation with uniform, log-uniform or custom negative samplers) and
hierarchical_sigmoid (a binary code path per class: Paddle's default complete tree or a custom
path_table/path_code). With is_sparse the table's gradient is a SelectedRows of the rows
used, as an embedding's is.
"""
import numpy as np

from ..core import philox
from ..core.dtypes import VarType
from ..core.tensor import LoDTensor, SelectedRows
from ..errors import ExecutionError
from .common import grad_maker, sigmoid
from . import random_stream
from .lookup import remote_lookup, remote_sections
from .registry import In, OpDef, Out, ints, strings

SAMPLERS = {"uniform": 0, "log_uniform": 1, "custom_dist": 2}


def alias_tables(dist):
    """The alias tables (CustomDistAlias int32, CustomDistAliasProbs float32) Fluid 1.8's
    nce layer builds from `dist` (one probability per class, used as given): each class's
    share n p is paired first-in first-out with a class above 1 that tops it up; a class
    left exactly at 1, or last in either queue, takes alias -1 (itself)."""
    p = np.asarray(dist, dtype=np.float64).reshape(-1)
    if not len(p) or (p < 0).any() or not np.isfinite(p).all() or p.sum() <= 0:
        raise ValueError("custom_dist must be a non-empty list of non-negative probabilities "
                         "with a positive sum")
    n = len(p)
    probs, alias = [0.0] * n, [0] * n
    bigs, littles = [], []

    def place(i, q):
        if q > 1.0:
            bigs.append((i, q))
        elif q < 1.0:
            littles.append((i, q))
        else:
            probs[i], alias[i] = q, -1

    for i, v in enumerate(p):
        place(i, float(v) * n)
    while bigs and littles:
        (bi, bq), (li, lq) = bigs.pop(0), littles.pop(0)
        probs[li], alias[li] = lq, bi
        place(bi, bq + lq - 1)
    for rest in (bigs, littles):
        if rest:
            probs[rest[0][0]], alias[rest[0][0]] = 1.0, -1
    return np.asarray(alias, np.int32), np.asarray(probs, np.float32)


class _Sampler:
    """Fluid 1.8's samplers over classes [0, n), drawing from the op's Philox stream
    (core/philox.py; runtime/nce.h draws the same classes in generated code), and a class's
    probability as Fluid's kernels give it, a float32 (the cost's k P(l) is float32 even
    for a float64 op). uniform: class (word * n) >> 32 of word i, P = 1/n. log_uniform:
    floor(exp(u ln n)) - 1 modulo n - 1 with u the 24-bit uniform of word i (the philox
    module's own exp and log, so generated code matches it bit for bit), P(v) =
    ln((v + 2) / (v + 1)) / ln n (ln n held as a float32). custom_dist: Walker's alias
    draw, a class from word 2i keeps itself unless the uniform of word 2i + 1 is above its
    alias probability and its alias is not -1; P = CustomDistProbs."""

    def __init__(self, kind, n, probs=None, alias=None, alias_probs=None):
        self.kind, self.n = kind, n
        self.probs, self.alias, self.alias_probs = probs, alias, alias_probs
        self.log_range = np.float32(philox.log(float(n)))

    def sample(self, size, key, ks, run):
        m = int(np.prod(size, dtype=np.int64))
        if self.kind == 0:
            return philox.integers(m, self.n, key, ks, run).reshape(size)
        if self.kind == 1:
            u = philox.uniform01(m, key, ks, run)
            v = np.floor(philox.exp(u * np.float64(self.log_range))).astype(np.int64) - 1
            return (v % max(self.n - 1, 1)).reshape(size)
        w = philox.words(2 * m, key, ks, run).reshape(-1, 2)
        idx = ((w[:, 0].astype(np.uint64) * np.uint64(self.n)) >> np.uint64(32)).astype(np.int64)
        u = (w[:, 1] >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
        a = self.alias[idx]
        take = (u > self.alias_probs[idx]) & (a != -1)
        return np.where(take, a, idx).reshape(size)

    def probability(self, k):
        if self.kind == 0:
            return np.full(k.shape, 1.0 / self.n, np.float32)
        if self.kind == 1:
            return (np.log((k + 2.0) / (k + 1.0)) / np.float64(self.log_range)).astype(
                np.float32)
        return self.probs[k]


def _nce_sampler(attrs, probs, alias, alias_probs):
    n, kind = attrs["num_total_classes"], attrs["sampler"]
    if kind not in (0, 1, 2):
        raise ExecutionError(f"nce: sampler must be 0 (uniform), 1 (log_uniform) or 2 "
                             f"(custom_dist), got {kind}")
    if kind != 2:
        return _Sampler(kind, n)
    if probs is None or alias is None or alias_probs is None:
        raise ExecutionError("nce: the custom_dist sampler needs inputs CustomDistProbs, "
                             "CustomDistAlias and CustomDistAliasProbs")
    tables = {"CustomDistProbs": np.asarray(probs._array, np.float32).reshape(-1),
              "CustomDistAlias": np.asarray(alias._array).reshape(-1).astype(np.int64),
              "CustomDistAliasProbs": np.asarray(alias_probs._array, np.float32).reshape(-1)}
    for slot, t in tables.items():
        if len(t) != n:
            raise ExecutionError(f"nce: {slot} has {len(t)} entries for "
                                 f"num_total_classes={n}")
    a = tables["CustomDistAlias"]
    if ((a < -1) | (a >= n)).any():
        raise ExecutionError(f"nce: CustomDistAlias holds {int(a[(a < -1) | (a >= n)][0])}, "
                             f"not a class of num_total_classes={n} (or -1)")
    return _Sampler(2, n, *tables.values())


def _nce_logits(x, rows, b, labels):
    """SampleLogits as Fluid's kernel rounds them: Bias[l] + x_i . W[l] in the op's dtype,
    then sigmoid in double rounded to it (rows: W[labels], [N, K, D])."""
    z = np.einsum("nd,nkd->nk", x, rows)
    if b is not None:
        z = b.reshape(-1)[labels] + z
    return (1.0 / (1.0 + np.exp(-z.astype(np.float64)))).astype(x.dtype)


def _nce_cost(o, q, nt, sw):
    """Cost [N, 1] as Fluid's kernel sums it, in o's dtype, one sampled label at a time:
    Cost_i += w_i * -log(o / (o + q)) for a true label, -log(q / (o + q)) for a negative."""
    dt = o.dtype
    w = np.ones(len(o), dt) if sw is None else np.asarray(sw, dt).reshape(-1)
    cost = np.zeros(len(o), dt)
    for j in range(o.shape[1]):
        oj, qj = o[:, j], q[:, j].astype(dt)
        cost = cost + w * -np.log((oj if j < nt else qj) / (oj + qj))
    return cost.reshape(-1, 1)


class NCE(OpDef):
    type = "nce"
    inputs = (In("Input"), In("Label", no_grad=True), In("Weight"),
              In("Bias", dispensable=True), In("SampleWeight", dispensable=True, no_grad=True),
              In("CustomDistProbs", dispensable=True, no_grad=True),
              In("CustomDistAlias", dispensable=True, no_grad=True),
              In("CustomDistAliasProbs", dispensable=True, no_grad=True))
    outputs = (Out("Cost"), Out("SampleLogits", intermediate=True),
               Out("SampleLabels", intermediate=True))
    attrs = {"num_total_classes": 1, "num_neg_samples": 10, "custom_neg_classes": ints(),
             "sampler": 0, "seed": 0, "is_sparse": False, "remote_prefetch": False,
             "is_test": False, "trainer_id": 0, "height_sections": ints(),
             "epmap": strings(), "table_names": strings()}
    kind = "value"
    share_lod = None
    doc = ("Cost[i] = sum over the true labels of -log(o / (o + k P(l))) and over "
           "num_neg_samples sampled labels of -log(k P(l) / (o + k P(l))), o = sigmoid(x_i . "
           "W[l] + b[l]), k = num_neg_samples, P the sampler's probability.")

    @staticmethod
    def infer_shape(ctx):
        x, lab = ctx.input_shape("Input"), ctx.input_shape("Label")
        if len(x) != 2 or len(lab) != 2:
            ctx.fail("Input must be [batch, dim] and Label [batch, num_true_class]")
        width = (lab[1] + ctx.attr("num_neg_samples")) if lab[1] > 0 else -1
        ctx.set_output("Cost", [x[0], 1], ctx.input_dtype("Input"), 0)
        ctx.set_output("SampleLogits", [x[0], width], ctx.input_dtype("Input"), 0)
        ctx.set_output("SampleLabels", [x[0], width], "int64", 0)

    random_stream = "Cost"

    @classmethod
    def forward(cls, attrs, stream):
        """forward(x, label, rows_of, b, sw, probs, alias, alias_probs, state) -> (Cost,
        SampleLogits, SampleLabels), where rows_of(labels) gives the table rows [N, K, D] of
        the sampled labels (from the local Weight, or fetched from the parameter servers)
        and state is the op's [key, run] Philox state (ops/random_stream.py)."""
        k, seed = attrs["num_neg_samples"], attrs["seed"]
        custom_neg = [int(c) for c in attrs["custom_neg_classes"]]
        n = attrs["num_total_classes"]
        if custom_neg and len(custom_neg) != k:
            raise ExecutionError(f"nce: custom_neg_classes has {len(custom_neg)} classes but "
                                 f"num_neg_samples is {k}")

        def forward(x, label, rows_of, b, sw, probs, alias, alias_probs, state):
            sampler = _nce_sampler(attrs, probs, alias, alias_probs)
            xa = x._array
            lab = np.asarray(label._array).astype(np.int64).reshape(len(xa), -1)
            if lab.size and (lab.min() < 0 or lab.max() >= n):
                raise ExecutionError(f"nce: label {int(lab.max())} is out of range for "
                                     f"num_total_classes={n}")
            if custom_neg:
                neg = np.tile(np.asarray(custom_neg, np.int64), (len(xa), 1))
            else:   # seeded: the same negatives every run (Paddle's); seed 0: the state's
                key, ks, run = philox.key_and_run(seed, state, stream)
                neg = sampler.sample((len(xa), k), key, ks, run).astype(np.int64)
            labels = np.concatenate([lab, neg], axis=1)
            o = _nce_logits(xa, rows_of(labels), b._array if b is not None else None, labels)
            q = sampler.probability(labels) * np.float32(k)
            cost = _nce_cost(o, q, lab.shape[1], None if sw is None else sw._array)
            return LoDTensor(cost), LoDTensor(o), LoDTensor(labels)
        return forward

    @classmethod
    def prepare(cls, attrs, outputs, stream):
        forward = cls.forward(attrs, stream)

        def kernel(x, label, w, b, sw, probs, alias, alias_probs, state):
            return forward(x, label, lambda labels: w._array[labels], b, sw, probs, alias,
                           alias_probs, state)
        return kernel

    @classmethod
    def env_step(cls, p):
        """With `remote_prefetch` and an `epmap` (Fluid 1.x's nce over a table split across
        parameter servers), the sampled labels' rows come from the servers' tables (as a
        remote lookup_table's: lookup.remote_lookup) in place of the local Weight; otherwise
        None (the kernel)."""
        attrs = p.attrs
        remote = remote_sections(attrs, cls.type)
        if remote is None:
            return None
        first, epmap, tables = remote
        state_name = random_stream.state_var(p.op)
        si = p.idx(state_name) if state_name is not None else None
        forward = cls.forward(attrs, random_stream.stream_of(p.op))
        ins = [p.in_one(s.name) for s in cls.inputs]
        outs = [p.out_one(s.name) for s in cls.outputs]

        def step(frame, env):
            x, label, _w, *rest = [frame[i].value if i is not None else None for i in ins]
            state = frame[si].value._array if si is not None else None

            def rows_of(labels):
                rows = remote_lookup(env, first, epmap, tables, "SampleLabels",
                                     labels.reshape(-1), attrs["trainer_id"], cls.type)
                return rows.astype(x._array.dtype, copy=False).reshape(
                    labels.shape + rows.shape[1:])
            for o, v in zip(outs, forward(x, label, rows_of, *rest, state)):
                if o is not None:
                    frame[o].value = v
        return step

    grad = grad_maker("nce_grad", [s.name for s in inputs] +
                      ["SampleLogits", "SampleLabels", "Cost@GRAD"], ("Input", "Weight", "Bias"))


class _TableGrad(OpDef):
    """A grad op whose gradient of input `table` is a SelectedRows when is_sparse."""
    kind = "value"
    table = None

    @classmethod
    def infer_shape(cls, ctx):
        slot = cls.table + "@GRAD"
        if ctx.has_output(slot):
            t = VarType.SELECTED_ROWS if ctx.attr("is_sparse") else VarType.LOD_TENSOR
            ctx.set_output(slot, ctx.input_shape(cls.table), ctx.input_dtype(cls.table), type=t)


def _table_grad(rows, d, shape, sparse):
    """Gradient of a [height, dim] table from per-use rows (ids) and their values d."""
    if sparse:
        return SelectedRows(rows.astype(np.int64), shape[0], np.ascontiguousarray(d))
    out = np.zeros(shape, d.dtype)
    np.add.at(out, rows, d)
    return LoDTensor(out)


class NCEGrad(_TableGrad):
    type = "nce_grad"
    inputs = NCE.inputs + (In("SampleLogits"), In("SampleLabels"), In("Cost@GRAD"))
    outputs = (Out("Input@GRAD", dispensable=True), Out("Weight@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = NCE.attrs
    table = "Weight"

    @classmethod
    def prepare(cls, attrs, outputs):
        k, sparse = attrs["num_neg_samples"], attrs["is_sparse"]

        def kernel(x, label, w, b, sw, probs, alias, alias_probs, logits, sample_labels,
                   dcost):
            sampler = _nce_sampler(attrs, probs, alias, alias_probs)
            xa, wa = x._array, w._array
            dt = xa.dtype
            labels = np.asarray(sample_labels._array).astype(np.int64)
            nt = labels.shape[1] - k
            # the forward's SampleLogits and Fluid's order of operations, in the op's dtype
            o = np.asarray(logits._array).astype(dt, copy=False)
            q = (sampler.probability(labels) * np.float32(k)).astype(dt)
            sw_ = (np.ones((len(xa), 1), dt) if sw is None
                   else np.asarray(sw._array, dt).reshape(-1, 1))
            dlogit = np.concatenate([sw_ * (q[:, :nt] / (o[:, :nt] + q[:, :nt]))
                                     * (o[:, :nt] - 1),
                                     sw_ * (o[:, nt:] * (1 - o[:, nt:]) / (o[:, nt:] + q[:, nt:]))],
                                    axis=1)
            dlogit = dlogit * np.asarray(dcost._array, dt).reshape(-1, 1)
            dx = np.zeros_like(xa)
            for j in range(labels.shape[1]):
                dx = dx + wa[labels[:, j]] * dlogit[:, j:j + 1]
            dw_rows = (dlogit[..., None] * xa[:, None, :]).reshape(-1, xa.shape[1])
            dw = _table_grad(labels.reshape(-1), dw_rows, wa.shape, sparse)
            db = None
            if b is not None:
                db = np.zeros(b._array.size, dt)
                np.add.at(db, labels.reshape(-1), dlogit.reshape(-1))
                db = LoDTensor(db.reshape(b._array.shape))
            return LoDTensor(dx), dw, db
        return kernel


# --- hierarchical_sigmoid --------------------------------------------------------------------
def _default_codes(label, num_classes):
    """Paddle's complete binary tree: (node index [N, L], bit [N, L], valid [N, L]) with
    L = bit length of num_classes - 1."""
    c = label.reshape(-1).astype(np.int64) + num_classes
    width = int(num_classes - 1).bit_length()
    j = np.arange(width)
    lengths = np.array([int(v).bit_length() - 1 for v in c], np.int64)
    valid = j[None, :] < lengths[:, None]
    index = np.where(valid, (c[:, None] >> (j[None, :] + 1)) - 1, 0)
    bits = np.where(valid, (c[:, None] >> j[None, :]) & 1, 0)
    return index, bits, valid


def _custom_codes(table, code):
    t = np.asarray(table._array).astype(np.int64)
    c = np.asarray(code._array).astype(np.int64)
    if t.shape != c.shape:
        raise ExecutionError(f"hierarchical_sigmoid: PathTable {list(t.shape)} and PathCode "
                             f"{list(c.shape)} must have the same shape")
    neg = t < 0   # a path ends at its first negative entry
    valid = ~np.logical_or.accumulate(neg, axis=1)
    return np.where(valid, t, 0), np.where(valid, c != 0, 0).astype(np.int64), valid


def _hsig_codes(op, attrs, x, label, table, code, w):
    if (table is None) != (code is None):
        raise ExecutionError(f"{op}: give both PathTable and PathCode for a custom tree, or "
                             f"neither")
    if table is not None:
        index, bits, valid = _custom_codes(table, code)
    else:
        lab = np.asarray(label._array).reshape(-1)
        n = attrs["num_classes"]
        if lab.size and (lab.min() < 0 or lab.max() >= n):
            raise ExecutionError(f"{op}: label {int(lab.max())} is out of range for "
                                 f"num_classes={n}")
        index, bits, valid = _default_codes(lab, n)
    if index.shape[0] != x._array.shape[0]:
        raise ExecutionError(f"{op}: {index.shape[0]} paths for {x._array.shape[0]} rows of X")
    if valid.any() and index[valid].max() >= w._array.shape[0]:
        raise ExecutionError(f"{op}: tree node {int(index[valid].max())} is out of range for "
                             f"W with {w._array.shape[0]} rows")
    return index, bits, valid


def _hsig_pre(x, w, b, index, valid):
    pre = np.einsum("nd,nld->nl", x, w[index])
    if b is not None:
        pre = pre + b.reshape(-1)[index]
    return np.clip(np.where(valid, pre, 0.0), -40.0, 40.0)


class HierarchicalSigmoid(OpDef):
    type = "hierarchical_sigmoid"
    inputs = (In("X"), In("W"), In("Label", no_grad=True),
              In("PathTable", dispensable=True, no_grad=True),
              In("PathCode", dispensable=True, no_grad=True), In("Bias", dispensable=True))
    outputs = (Out("Out"), Out("PreOut", intermediate=True),
               Out("W_Out", dispensable=True, intermediate=True))
    attrs = {"num_classes": 2, "is_sparse": False, "remote_prefetch": False, "trainer_id": 0,
             "height_sections": ints(), "epmap": strings(), "table_names": strings()}
    kind = "value"
    share_lod = "X"            # Out (one row per X row) keeps X's LoD, as Fluid's
    lod_outputs = ("Out",)
    doc = ("Out[i] = sum over the nodes j of label i's code path of softplus(z) - bit_j z, "
           "z = X[i] . W[node_j] + Bias[node_j] (clipped to [-40, 40]); as in Paddle, every "
           "slot past a shorter path adds log 2.")

    @staticmethod
    def infer_shape(ctx):
        x = ctx.input_shape("X")
        if ctx.has_input("PathTable"):
            width = ctx.input_shape("PathTable")[-1]
        else:
            width = int(ctx.attr("num_classes") - 1).bit_length()
        ctx.set_output("Out", [x[0], 1], ctx.input_dtype("X"), 0)
        ctx.set_output("PreOut", [x[0], width], ctx.input_dtype("X"), 0)
        if ctx.has_output("W_Out"):
            ctx.share("W", "W_Out")

    @classmethod
    def prepare(cls, attrs, outputs):
        def kernel(x, w, label, table, code, b):
            index, bits, valid = _hsig_codes(cls.type, attrs, x, label, table, code, w)
            pre = _hsig_pre(x._array, w._array, b._array if b is not None else None,
                            index, valid)
            soft = np.logaddexp(0.0, pre)
            out = soft.sum(1, keepdims=True) - (bits * pre).sum(1, keepdims=True)
            dt = x._array.dtype
            w_out = LoDTensor(w._array.copy()) if "W_Out" in outputs else None
            return LoDTensor(out.astype(dt), x._lod), LoDTensor(soft.astype(dt)), w_out
        return kernel


    grad = grad_maker("hierarchical_sigmoid_grad", ("X", "W", "Label", "PathTable", "PathCode",
                                                    "Bias", "PreOut", "Out@GRAD"),
                      ("X", "W", "Bias"))


class HierarchicalSigmoidGrad(_TableGrad):
    type = "hierarchical_sigmoid_grad"
    inputs = (In("X"), In("W"), In("Label"), In("PathTable", dispensable=True),
              In("PathCode", dispensable=True), In("Bias", dispensable=True), In("PreOut"),
              In("Out@GRAD"))
    outputs = (Out("X@GRAD", dispensable=True), Out("W@GRAD", dispensable=True),
               Out("Bias@GRAD", dispensable=True))
    attrs = HierarchicalSigmoid.attrs
    table = "W"

    @classmethod
    def prepare(cls, attrs, outputs):
        sparse = attrs["is_sparse"]

        def kernel(x, w, label, table, code, b, _pre_out, dout):
            index, bits, valid = _hsig_codes(cls.type, attrs, x, label, table, code, w)
            xa, wa = x._array, w._array
            pre = _hsig_pre(xa, wa, b._array if b is not None else None, index, valid)
            dpre = (sigmoid(pre) - bits) * valid * np.asarray(dout._array).reshape(-1, 1)
            dpre = dpre.astype(xa.dtype)
            dx = np.einsum("nl,nld->nd", dpre, wa[index])
            rows, used = index[valid], dpre[valid]
            n_of = np.nonzero(valid)[0]
            dw = _table_grad(rows, used[:, None] * xa[n_of], wa.shape, sparse)
            db = None
            if b is not None:
                db = np.zeros(b._array.size, xa.dtype)
                np.add.at(db, rows, used)
                db = LoDTensor(db.reshape(b._array.shape))
            return LoDTensor(dx), dw, db
        return kernel


"""Ops of Fluid 1.x's CTR / recommendation models: hash (XXH64 of each row, for hashed
feature ids), filter_by_instag (keep the instances carrying a wanted tag), data_norm
(normalisation by running statistics kept as parameters) and cvm (the show/click columns of
continuous_value_model), with the gradients Paddle 1.8 gives.

data_norm's "gradients" of its statistics are not derivatives: its grad op writes the batch's
own statistics (BatchSize@GRAD = the rows counted, BatchSum@GRAD = their sum,
BatchSquareSum@GRAD = the sum of squared deviations from the current mean plus rows *
epsilon) and folds them into the statistics with the summary rule
stat = summary_decay_rate * stat + grad, in place, as Paddle 1.8's CUDA kernel does (its CPU
kernel leaves that to the pslib parameter server, which applies the same rule).
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ShapeError
from .registry import In, OpDef, Out, long
from .xxhash64 import xxh64_rows


# --- hash ---------------------------------------------------------------------------------------
class Hash(OpDef):
    type = "hash"
    inputs = (In("X", no_grad=True),)
    outputs = (Out("Out"),)
    attrs = {"num_hash": 1, "mod_by": long(100000)}
    doc = ("Out[i, k, 0] = XXH64(bytes of row i of X, seed k) % mod_by for k < num_hash "
           "(X 2-D int32/int64, Out [N, num_hash, 1] of X's type, X's LoD).")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        if len(xs) != 2:
            ctx.fail(f"X must be 2-D, got {xs}")
        ctx.set_output("Out", xs[:-1] + [ctx.attr("num_hash"), 1], ctx.input_dtype("X"),
                       ctx.input_lod_level("X"))

    @staticmethod
    def kernel(x, *, num_hash, mod_by):
        if x.ndim != 2:
            raise ShapeError(f"hash: X must be 2-D, got {list(x.shape)}")
        if x.dtype not in (np.int32, np.int64):
            raise ShapeError(f"hash: X must be int32 or int64, got {x.dtype}")
        if mod_by <= 0:
            raise ShapeError(f"hash: mod_by must be positive, got {mod_by}")
        rows = np.ascontiguousarray(x).view(np.uint8).reshape(x.shape[0], -1)
        out = np.empty((x.shape[0], num_hash, 1), x.dtype)
        m = np.uint64(mod_by)
        for k in range(num_hash):
            # uint64 % mod_by, stored into X's type as C++ does (wraps for int32)
            out[:, k, 0] = (xxh64_rows(rows, k) % m).astype(x.dtype)
        return out


# --- filter_by_instag -----------------------------------------------------------------------------
def _offsets(t, n, what):
    if t._lod:
        off = [int(v) for v in t._lod[0]]
    else:
        off = list(range(n + 1))
    if off[0] != 0 or off[-1] > n or any(b < a for a, b in zip(off, off[1:])):
        raise ExecutionError(f"filter_by_instag: the LoD of {what} does not fit its {n} rows")
    return off


class FilterByInstag(OpDef):
    type = "filter_by_instag"
    inputs = (In("Ins"), In("Ins_tag", no_grad=True), In("Filter_tag", no_grad=True))
    outputs = (Out("Out"), Out("LossWeight"), Out("IndexMap"))
    attrs = {"is_lod": True, "out_val_if_empty": long(0)}
    kind = "value"
    share_lod = None
    doc = ("Keep the instances of Ins (sequences of its LoD, or rows when is_lod is False) "
           "whose tags (the sequences of Ins_tag) hold one of Filter_tag. IndexMap rows are "
           "[first Out row, first Ins row, rows]; LossWeight 1 per kept instance. None kept: "
           "one row of out_val_if_empty with LossWeight 0.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("Ins")
        dt = ctx.input_dtype("Ins")
        ctx.set_output("Out", [-1, xs[1] if len(xs) > 1 else -1], dt, 1)
        ctx.set_output("LossWeight", [-1, 1], "float32", 1)
        ctx.set_output("IndexMap", [-1, 3], "int64", 1)

    @staticmethod
    def kernel(ins, tags, filt, *, is_lod, out_val_if_empty):
        x = np.asarray(ins._array)
        if x.ndim != 2:
            raise ShapeError(f"filter_by_instag: Ins must be 2-D, got {list(x.shape)}")
        tag = np.asarray(tags._array).reshape(-1).astype(np.int64)
        if not tags._lod:
            raise ExecutionError("filter_by_instag: Ins_tag needs a LoD (the tags of each "
                                 "instance)")
        tag_off = _offsets(tags, len(tag), "Ins_tag")
        ins_off = _offsets(ins, x.shape[0], "Ins") if is_lod else list(range(x.shape[0] + 1))
        if len(ins_off) < len(tag_off):
            raise ExecutionError(f"filter_by_instag: Ins_tag holds {len(tag_off) - 1} "
                                 f"instances, Ins {len(ins_off) - 1}")
        wanted = set(np.asarray(filt._array).reshape(-1).astype(np.int64).tolist())
        keep = [i for i in range(len(tag_off) - 1)
                if wanted.intersection(tag[tag_off[i]:tag_off[i + 1]].tolist())]
        if not keep:
            out = np.full((1, x.shape[1]), out_val_if_empty).astype(x.dtype)
            lod = [[0, 1]]
            return (LoDTensor(out, [[0, 1]]), LoDTensor(np.zeros((1, 1), np.float32), lod),
                    LoDTensor(np.array([[0, 1, 1]], np.int64), lod))
        lengths = [ins_off[i + 1] - ins_off[i] for i in keep]
        out_off = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        rows = np.concatenate([np.arange(ins_off[i], ins_off[i + 1]) for i in keep]) \
            .astype(np.int64)
        out = x[rows].copy()
        imap = np.stack([out_off[:-1], [ins_off[i] for i in keep], lengths], axis=1) \
            .astype(np.int64)
        lod = [list(range(len(keep) + 1))]
        return (LoDTensor(out, [out_off.tolist()]),
                LoDTensor(np.ones((len(keep), 1), np.float32), lod), LoDTensor(imap, lod))

    @staticmethod
    def grad(g):
        g.op("filter_by_instag_grad",
             {"IndexMap": g.output("IndexMap"), "Ins": g.input("Ins"),
              "LossWeight": g.output("LossWeight"), "Out@GRAD": g.output_grad("Out")},
             {"Ins@GRAD": g.input_grad("Ins")}, g.attrs())


class FilterByInstagGrad(OpDef):
    type = "filter_by_instag_grad"
    inputs = (In("IndexMap"), In("Ins"), In("LossWeight"), In("Out@GRAD"))
    outputs = (Out("Ins@GRAD"),)
    attrs = FilterByInstag.attrs
    kind = "value"
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(imap, ins, weight, dout, *, is_lod, out_val_if_empty):
        x = np.asarray(ins._array)
        d = np.asarray(dout._array)
        m = np.asarray(imap._array).reshape(-1, 3)
        w = np.asarray(weight._array).reshape(-1)
        dx = np.zeros((x.shape[0], d.shape[1]), d.dtype)
        if not (w.size == 1 and w[0] == 0):       # something was kept
            for src, dst, n in m.tolist():
                if dst < 0 or dst + n > x.shape[0] or src < 0 or src + n > d.shape[0]:
                    raise ExecutionError(f"filter_by_instag_grad: IndexMap row "
                                         f"{[src, dst, n]} is out of range")
                dx[dst:dst + n] = d[src:src + n]
        return LoDTensor(dx, ins._lod)


# --- data_norm -------------------------------------------------------------------------------------
_MIN_PRECISION = 1e-7


def _channels(x, layout):
    if x.ndim != 2:
        raise ShapeError(f"data_norm: X must be 2-D [N, C] (Paddle's kernel reads it so), got "
                         f"{list(x.shape)}")
    return x.shape[1] if layout == "NCHW" else x.shape[-1]


def _live_slots(x, slot_dim):
    """[N, C] mask: True where the slot (slot_dim columns) holding the element is in use, i.e.
    its first value is not within 1e-7 of zero (an absent slot-wise embedding)."""
    n, c = x.shape
    if c % slot_dim:
        raise ShapeError(f"data_norm: slot_dim {slot_dim} does not divide X's {c} columns")
    first = x[:, ::slot_dim]
    live = ~((first > -_MIN_PRECISION) & (first < _MIN_PRECISION))
    return np.repeat(live, slot_dim, axis=1)


class DataNorm(OpDef):
    type = "data_norm"
    inputs = (In("X"), In("BatchSize"), In("BatchSum"), In("BatchSquareSum"),
              In("scale_w", dispensable=True), In("bias", dispensable=True))
    outputs = (Out("Y"), Out("Means", intermediate=True), Out("Scales", intermediate=True))
    attrs = {"epsilon": 1e-4, "slot_dim": -1, "summary_decay_rate": 0.9999999,
             "enable_scale_and_shift": False, "data_layout": "NCHW", "sync_stats": False,
             "use_mkldnn": False}
    doc = ("Means = BatchSum / BatchSize, Scales = sqrt(BatchSize / BatchSquareSum); Y = (X - "
           "Means) * Scales (then * scale_w + bias with enable_scale_and_shift). With "
           "slot_dim > 0 a slot whose first value is 0 stays 0.")

    @staticmethod
    def infer_shape(ctx):
        xs = ctx.input_shape("X")
        c = xs[1] if ctx.attr("data_layout") == "NCHW" else xs[-1]
        if ctx.attr("enable_scale_and_shift"):
            if not (ctx.has_input("scale_w") and ctx.has_input("bias")):
                ctx.fail("enable_scale_and_shift needs the inputs scale_w and bias")
            for slot in ("scale_w", "bias"):
                s = ctx.input_shape(slot)
                if len(s) != 1 or (s[0] >= 0 and c >= 0 and s[0] != c):
                    ctx.fail(f"{slot} must be [{c}], got {s}")
        dt = ctx.input_dtype("X")
        ctx.set_output("Y", xs, dt, ctx.input_lod_level("X"))
        ctx.set_output("Means", [c], dt, 0)
        ctx.set_output("Scales", [c], dt, 0)

    @staticmethod
    def kernel(x, size, total, square, scale_w, bias, *, slot_dim, enable_scale_and_shift,
               data_layout):
        c = _channels(x, data_layout)
        for name, v in (("BatchSize", size), ("BatchSum", total), ("BatchSquareSum", square)):
            if v.size != c:
                raise ShapeError(f"data_norm: {name} holds {v.size} values, X has {c} "
                                 f"channels")
        t = x.dtype
        means = (total.reshape(-1) / size.reshape(-1)).astype(t)
        scales = np.sqrt(size.reshape(-1) / square.reshape(-1)).astype(t)
        y = (x - means) * scales
        if enable_scale_and_shift:
            if scale_w is None or bias is None:
                raise ExecutionError("data_norm: enable_scale_and_shift needs scale_w and bias")
            y = y * scale_w.reshape(-1) + bias.reshape(-1)
        if slot_dim > 0 and x.shape[0] > 0:
            y = np.where(_live_slots(x, slot_dim), y, 0)
        return y.astype(t), means, scales

    @staticmethod
    def grad(g):
        ins = {"X": g.input("X"), "Y@GRAD": g.output_grad("Y"), "Scales": g.output("Scales"),
               "Means": g.output("Means")}
        for slot in ("scale_w", "bias"):
            if g.input(slot):
                ins[slot] = g.input(slot)
        stats = ("BatchSize", "BatchSum", "BatchSquareSum")
        outs = {s + "@GRAD": g.input_grad(s)
                for s in ("X",) + stats + ("scale_w", "bias") if g.input(s)}
        for s in stats:       # the summary update, in place (Paddle's grad op writes them)
            ins[s] = g.input(s)
            outs[s] = g.input(s)
        g.op("data_norm_grad", ins, outs, g.attrs())


class DataNormGrad(OpDef):
    type = "data_norm_grad"
    inputs = (In("X"), In("Y@GRAD"), In("Scales"), In("Means"),
              In("scale_w", dispensable=True), In("bias", dispensable=True),
              In("BatchSize", dispensable=True), In("BatchSum", dispensable=True),
              In("BatchSquareSum", dispensable=True))
    outputs = (Out("X@GRAD", dispensable=True), Out("BatchSize@GRAD", dispensable=True),
               Out("BatchSum@GRAD", dispensable=True),
               Out("BatchSquareSum@GRAD", dispensable=True),
               Out("scale_w@GRAD", dispensable=True), Out("bias@GRAD", dispensable=True),
               Out("BatchSize", dispensable=True), Out("BatchSum", dispensable=True),
               Out("BatchSquareSum", dispensable=True))
    attrs = DataNorm.attrs
    infer_shape = None
    share_lod = None

    @staticmethod
    def kernel(x, dy, scales, means, scale_w, bias, size, total, square, *, epsilon,
               slot_dim, enable_scale_and_shift, data_layout, summary_decay_rate):
        c = _channels(x, data_layout)
        t = x.dtype
        n = x.shape[0]
        scales, means = scales.reshape(-1), means.reshape(-1)
        live = _live_slots(x, slot_dim) if slot_dim > 0 and n > 0 else None
        dscale = dbias = None
        if not enable_scale_and_shift:
            dx = dy * scales                       # every element, as Paddle's kernel
        else:
            if scale_w is None:
                raise ExecutionError("data_norm_grad: enable_scale_and_shift needs scale_w")
            w = scale_w.reshape(-1)
            norm = (x - means) * scales * dy
            if live is None:
                dx = dy * scales * w
                dbias, dscale = dy.sum(0), norm.sum(0)
            else:
                dx = np.where(live, dy * scales * w, 0)
                dbias = np.where(live, dy, 0).sum(0)
                dscale = np.where(live, norm, 0).sum(0)
        eps = t.type(epsilon)
        if live is not None:
            cnt = live.sum(0).astype(t)
            s = np.where(live, x, 0).sum(0)
            sq = np.where(live, (x - means) ** 2, 0).sum(0)
            seen = cnt >= 1
            safe = np.where(seen, cnt, 1)
            dsum = np.where(seen, s / safe, s)
            dsq = np.where(seen, sq / safe + cnt * eps, sq)
            dsize = np.where(seen, t.type(1), cnt)
        else:
            dsize = np.full(c, n, t)
            dsum = x.sum(0)
            dsq = ((x - means) ** 2).sum(0) + dsize * eps
        cast = (lambda v: None if v is None else np.asarray(v, t))  # noqa: E731
        decay = t.type(summary_decay_rate)

        def summary(stat, d):
            if stat is None:
                return None
            if stat.size != c:
                raise ShapeError(f"data_norm_grad: a statistic holds {stat.size} values, X "
                                 f"has {c} channels")
            return (stat * decay + d.reshape(stat.shape)).astype(stat.dtype)
        return (cast(dx), cast(dsize), cast(dsum), cast(dsq), cast(dscale), cast(dbias),
                summary(size, dsize), summary(total, dsum), summary(square, dsq))


# --- cvm -------------------------------------------------------------------------------------
class Cvm(OpDef):
    type = "cvm"
    inputs = (In("X"), In("CVM", no_grad=True))
    outputs = (Out("Y"),)
    attrs = {"use_cvm": True}
    doc = ("CTR continuous values: X's first two columns (show, click) become log(show + 1) "
           "and log(click + 1) - log(show + 1) (use_cvm), or are dropped.")

    @staticmethod
    def infer_shape(ctx):
        xs = list(ctx.input_shape("X"))
        if not ctx.attr("use_cvm") and xs[-1] >= 0:
            xs[-1] -= 2
        # Y keeps X's LoD (share_lod), so it declares X's LoD level
        ctx.set_output("Y", xs, ctx.input_dtype("X"), ctx.input_lod_level("X"))

    @staticmethod
    def kernel(x, cvm, *, use_cvm):
        if not use_cvm:
            return x[..., 2:].copy()
        y = x.copy()
        y[..., 0] = np.log(x[..., 0] + 1)
        y[..., 1] = np.log(x[..., 1] + 1) - y[..., 0]
        return y

    grad = staticmethod(lambda g: g.op(
        "cvm_grad", {"X": g.input("X"), "CVM": g.input("CVM"), "Y@GRAD": g.output_grad("Y")},
        {"X@GRAD": g.input_grad("X")}, g.attrs()))


class CvmGrad(OpDef):
    type = "cvm_grad"
    inputs = (In("X"), In("CVM"), In("Y@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = Cvm.attrs
    infer_shape = None
    doc = ("X@GRAD = Y@GRAD on the embedding columns; the show/click columns get the CVM "
           "values themselves, as Paddle's kernel passes them to the sparse table.")

    @staticmethod
    def kernel(x, cvm, dy, *, use_cvm):
        dx = np.zeros_like(x)
        dx[..., 2:] = dy[..., 2:] if use_cvm else dy
        dx[..., :2] = cvm.reshape(dx[..., :2].shape)
        return dx

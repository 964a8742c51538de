"""pyramid_hash (Fluid 1.8's search_pyramid_hash): every n-gram (2 to pyramid_layer ids) of
each sequence of int ids X that passes the white and black bloom filters and survives
dropout is embedded by hashing: its num_emb values are num_emb / rand_len chunks of
rand_len consecutive values of the flat table W [space_len + rand_len, 1], chunk j starting
at XXH32(the n-gram as float32 bytes, seed=j * rand_len) mod space_len. A sequence with no
such n-gram gives one row of zeros. As Fluid 1.8 computes it:

* dropout (is_training != 0) draws glibc's rand_r from `seed` afresh each run (so a program
  drops the same n-grams every run, as Paddle's does); an n-gram is dropped when
  rand / RAND_MAX < drop_out_percent. Not training, the embeddings are multiplied by
  drop_out_percent.
* X holds one id a row: the first N values of X (N = its rows) are the ids, as Fluid's
  kernel reads them; X_Temp_Out keeps them as floats for the gradient.
* The gradient is Fluid's: pyramid_hash_grad moves W in place by -lr * Out@GRAD at the
  hashed chunks (W is not a trained parameter; nothing else updates it).

DropPos holds a 0/1 flag for every n-gram considered (1: embedded), one LoD piece a
sequence (Paddle gives its LoD as counts of the 1s)."""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError, ShapeError
from .bloomfilter import BloomFilter
from .registry import In, OpDef, Out
from .xxhash32 import xxh32_rows

RAND_MAX = 2147483647


def rand_r(state):
    """glibc's rand_r: (value, next state) from a uint32 state."""
    def step(s):
        return (s * 1103515245 + 12345) & 0xFFFFFFFF
    s = step(state)
    r = (s >> 16) % 2048
    s = step(s)
    r = (r << 10) ^ ((s >> 16) % 1024)
    s = step(s)
    r = (r << 10) ^ ((s >> 16) % 1024)
    return r, s


def _terms(offsets, layers):
    """(sequence, start, length) of every n-gram, in Fluid's order: per sequence, by
    length 2..layers, then by start."""
    out = []
    for b in range(len(offsets) - 1):
        w = offsets[b + 1] - offsets[b]
        for ilayer in range(1, min(layers, w)):
            out.extend((b, offsets[b] + l, ilayer + 1) for l in range(w - ilayer))
    return out


def _positions(ids, terms, num_emb, rand_len, space_len):
    """Chunk starts [len(terms), num_emb // rand_len] of the listed terms, hashed in groups
    of one length."""
    pos = np.zeros((len(terms), num_emb // rand_len), np.int64)
    by_len = {}
    for i, (_, start, n) in enumerate(terms):
        by_len.setdefault(n, []).append((i, start))
    for n, items in by_len.items():
        rows = np.array([ids[s:s + n] for _, s in items], np.float32)
        data = rows.view(np.uint8).reshape(len(items), 4 * n)
        pos[[i for i, _ in items]] = np.stack(
            [xxh32_rows(data, j).astype(np.int64) % space_len
             for j in range(0, num_emb, rand_len)], axis=1)
    return pos


def _layout(terms, flags, sequences):
    """(output row of each kept term, Out's LoD offsets, DropPos's LoD offsets): the kept
    terms of a sequence take its rows in order; a sequence with none takes one zero row."""
    seq = np.array([t[0] for t in terms], np.int64)
    kept_seq = seq[flags.astype(bool)]
    kept = np.bincount(kept_seq, minlength=sequences)
    out_off = np.concatenate([[0], np.cumsum(np.maximum(kept, 1))])
    first_kept = np.concatenate([[0], np.cumsum(kept)])[:-1]
    rank = np.arange(kept_seq.size) - first_kept[kept_seq]
    rows = out_off[:-1][kept_seq] + rank
    term_off = np.concatenate([[0], np.cumsum(np.bincount(seq, minlength=sequences))])
    return rows, out_off.tolist(), term_off.tolist()


_ATTRS = {"num_emb": 0, "space_len": 0, "pyramid_layer": 2, "rand_len": 0,
          "drop_out_percent": 0.0, "is_training": 0, "use_filter": True,
          "white_list_len": 0, "black_list_len": 0, "seed": 0, "lr": 0.0,
          "distribute_update_vars": ""}


def _lod0(x, op):
    if not x._lod:
        raise ExecutionError(f"{op}: Input(X) must hold LoD (sequences of ids)")
    off = [int(o) for o in x._lod[0]]
    if off[-1] != x._array.shape[0]:
        raise ExecutionError(f"{op}: Input(X)'s LoD {off} does not cover its "
                             f"{x._array.shape[0]} rows")
    return off


def _check_table(w, space_len, rand_len):
    if w.ndim != 2 or w.shape != (space_len + rand_len, 1):
        raise ShapeError(f"pyramid_hash: W{list(w.shape)} must be [space_len + rand_len, 1] "
                         f"= [{space_len + rand_len}, 1]")


class PyramidHash(OpDef):
    type = "pyramid_hash"
    kind = "value"
    inputs = (In("X", no_grad=True), In("W", no_grad=True),
              In("WhiteList", dispensable=True, no_grad=True),
              In("BlackList", dispensable=True, no_grad=True))
    outputs = (Out("Out"), Out("DropPos"), Out("X_Temp_Out", intermediate=True))
    attrs = dict(_ATTRS)
    doc = ("Out [rows, num_emb], one LoD piece a sequence: the hashed embeddings of its kept "
           "n-grams (one zero row when none is kept).")

    @staticmethod
    def infer_shape(ctx):
        from ..core.dtypes import VarType
        xs, ws = list(ctx.input_shape("X")), list(ctx.input_shape("W"))
        a = ctx.attr
        if len(xs) != 2:
            ctx.fail(f"the rank of Input(X) should be 2, got X{xs}")
        if len(ws) != 2:
            ctx.fail(f"the rank of Input(W) should be 2, got W{ws}")
        if ws[0] >= 0 and ws[0] != a("space_len") + a("rand_len"):
            ctx.fail(f"W's first dim should be space_len + rand_len = {a('space_len')} + "
                     f"{a('rand_len')}, got W{ws}")
        if ws[1] >= 0 and ws[1] != 1:
            ctx.fail(f"W's second dim should be 1, got W{ws}")
        if a("rand_len") <= 0 or a("num_emb") % a("rand_len"):
            ctx.fail(f"num_emb ({a('num_emb')}) must be a multiple of rand_len "
                     f"({a('rand_len')}) > 0")
        if a("pyramid_layer") < 2:
            ctx.fail(f"pyramid_layer must be >= 2, got {a('pyramid_layer')}")
        for slot, n in (("WhiteList", a("white_list_len")), ("BlackList", a("black_list_len"))):
            if n > 0:
                if not ctx.has_input(slot):
                    ctx.fail(f"Input({slot}) is needed when {slot.lower()[:5]}_list_len > 0")
                s = list(ctx.input_shape(slot))
                if s != [n, 1]:
                    ctx.fail(f"Input({slot}) must be [{n}, 1], got {s}")
        ctx.set_output("Out", [-1, a("num_emb")], ctx.input_dtype("W"), lod_level=1)
        ctx.set_output("DropPos", [-1, 1], VarType.INT32, lod_level=1)
        ctx.set_output("X_Temp_Out", xs, VarType.FP32)

    @classmethod
    def prepare(cls, attrs, outputs):
        a = {k: attrs[k] for k in _ATTRS}
        num_emb, rand_len, space_len = a["num_emb"], a["rand_len"], a["space_len"]
        layers, training, p = a["pyramid_layer"], a["is_training"] != 0, a["drop_out_percent"]
        # again at run time: a program file's attributes never passed the build-time checks
        if rand_len <= 0 or num_emb < 0 or num_emb % rand_len or space_len < 0 or layers < 2:
            raise ShapeError(f"pyramid_hash: num_emb {num_emb} must be a multiple of rand_len "
                             f"{rand_len} > 0, space_len {space_len} >= 0 and pyramid_layer "
                             f"{layers} >= 2")

        def kernel(x, w, white, black):
            off = _lod0(x, "pyramid_hash")
            table = w._array
            _check_table(table, space_len, rand_len)
            n = x._array.shape[0]
            ids = x._array.reshape(-1)[:n].astype(np.float32)
            temp = np.zeros(x._array.shape, np.float32)
            temp.reshape(-1)[:n] = ids
            filters = []
            if a["use_filter"]:
                for holder, slot, want in ((white, "WhiteList", True),
                                           (black, "BlackList", False)):
                    if a[f"{slot[:5].lower()}_list_len"] == 0:
                        continue
                    if holder is None or holder._array is None:
                        raise ExecutionError(f"pyramid_hash: use_filter with "
                                             f"{slot[:5].lower()}_list_len > 0 needs "
                                             f"Input({slot}) holding a bloom filter")
                    filters.append((BloomFilter(holder._array, slot), want))
            terms = _terms(off, layers)
            flags = np.zeros(len(terms), np.int32)
            state = a["seed"] & 0xFFFFFFFF
            for i, (_, start, length) in enumerate(terms):
                key = ids[start:start + length].tobytes() if filters else None
                if all((key in f) == want for f, want in filters):
                    if training:
                        r, state = rand_r(state)
                        flags[i] = 0 if np.float32(r) / np.float32(RAND_MAX) < p else 1
                    else:
                        flags[i] = 1
            kept = [t for t, f in zip(terms, flags) if f]
            pos = _positions(ids, kept, num_emb, rand_len, space_len)
            rows, out_off, term_off = _layout(terms, flags, len(off) - 1)
            out = np.zeros((out_off[-1], num_emb), table.dtype)
            flat = table.reshape(-1)
            out[rows] = flat[pos[:, :, None] + np.arange(rand_len)].reshape(len(kept), num_emb)
            if not training and table.dtype != np.int8:
                out = (out * np.float32(p)).astype(table.dtype)
            return (LoDTensor(out, [out_off]), LoDTensor(flags.reshape(-1, 1), [term_off]),
                    LoDTensor(temp))
        return kernel

    @staticmethod
    def grad(g):
        g.op("pyramid_hash_grad",
             {"X": g.input("X"), "W": g.input("W"), "DropPos": g.output("DropPos"),
              "X_Temp_Out": g.output("X_Temp_Out"), "Out@GRAD": g.output_grad("Out")},
             {"X@GRAD": g.input_grad("X")}, g.attrs())


class PyramidHashGrad(OpDef):
    type = "pyramid_hash_grad"
    kind = "value"
    inputs = (In("X"), In("W"), In("DropPos"), In("X_Temp_Out"), In("Out@GRAD"))
    outputs = (Out("X@GRAD"),)
    attrs = dict(_ATTRS)
    infer_shape = None
    doc = "W (in place) -= lr * Out@GRAD at each kept n-gram's hashed chunks."

    @classmethod
    def prepare(cls, attrs, outputs):
        from .optimizer_ops import writable_array
        num_emb, rand_len, space_len = attrs["num_emb"], attrs["rand_len"], attrs["space_len"]
        layers, lr = attrs["pyramid_layer"], attrs["lr"]

        def kernel(x, w, drop_pos, temp, dout):
            off = _lod0(x, "pyramid_hash_grad")
            table = writable_array(w, "pyramid_hash_grad", "W")
            _check_table(table, space_len, rand_len)
            ids = temp._array.reshape(-1)[:x._array.shape[0]].astype(np.float32)
            terms = _terms(off, layers)
            flags = drop_pos._array.reshape(-1)
            if flags.size != len(terms):
                raise ShapeError(f"pyramid_hash_grad: DropPos holds {flags.size} flags for "
                                 f"{len(terms)} n-grams")
            kept = [t for t, f in zip(terms, flags) if f]
            pos = _positions(ids, kept, num_emb, rand_len, space_len)
            rows, out_off, _ = _layout(terms, flags, len(off) - 1)
            d = dout._array.reshape(-1, num_emb)
            if d.shape[0] != out_off[-1]:
                raise ShapeError(f"pyramid_hash_grad: Out@GRAD has {d.shape[0]} rows, the "
                                 f"forward gave {out_off[-1]}")
            step = (-lr * d[rows]).reshape(len(kept), -1, rand_len).astype(table.dtype)
            np.add.at(table.reshape(-1), pos[:, :, None] + np.arange(rand_len), step)
            return LoDTensor(np.zeros(x._array.shape, np.float32), x._lod)
        return kernel

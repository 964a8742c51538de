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
    """{row of `terms`: chunk starts [num_emb // rand_len]} for the listed terms, hashed in
    groups of one length."""
    by_len = {}
    for i, (_, start, n) in enumerate(terms):
        by_len.setdefault(n, []).append((i, start))
    pos = {}
    for n, items in by_len.items():
        rows = np.array([ids[s:s + n] for _, s in items], np.float32)
        data = rows.view(np.uint8).reshape(len(items), 4 * n)
        hashed = np.stack([xxh32_rows(data, j).astype(np.int64) % space_len
                           for j in range(0, num_emb, rand_len)], axis=1)
        for (i, _), h in zip(items, hashed):
            pos[i] = h
    return pos


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
                if a["white_list_len"] != 0:
                    filters.append((BloomFilter(white._array, "WhiteList"), True))
                if a["black_list_len"] != 0:
                    filters.append((BloomFilter(black._array, "BlackList"), False))
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
            kept = [i for i in range(len(terms)) if flags[i]]
            pos = _positions(ids, [terms[i] for i in kept], num_emb, rand_len, space_len)
            chunk = np.arange(rand_len)
            rows, out_off, term_off, at = [], [0], [0], 0
            flat = table.reshape(-1)
            for b in range(len(off) - 1):
                mine = [k for k, i in enumerate(kept) if terms[i][0] == b]
                if not mine:
                    rows.append(np.zeros((1, num_emb), table.dtype))
                else:
                    starts = np.stack([pos[k] for k in mine])          # [t, chunks]
                    rows.append(flat[starts[:, :, None] + chunk].reshape(len(mine), num_emb))
                out_off.append(out_off[-1] + rows[-1].shape[0])
                at += sum(1 for t in terms if t[0] == b)
                term_off.append(at)
            out = np.concatenate(rows).astype(table.dtype)
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
            kept = [i for i in range(len(terms)) if flags[i]]
            pos = _positions(ids, [terms[i] for i in kept], num_emb, rand_len, space_len)
            d = dout._array.reshape(-1, num_emb)
            flat = table.reshape(-1)
            row, k = 0, 0
            for b in range(len(off) - 1):
                mine = [i for i in kept if terms[i][0] == b]
                if not mine:
                    row += 1                       # the zero row of an empty sequence
                    continue
                for _ in mine:
                    for c, s in enumerate(pos[k]):
                        flat[s:s + rand_len] -= lr * d[row, c * rand_len:(c + 1) * rand_len]
                    row += 1
                    k += 1
            return LoDTensor(np.zeros(x._array.shape, np.float32), x._lod)
        return kernel

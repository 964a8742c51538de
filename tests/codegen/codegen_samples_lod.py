"""Samples of the compiled forms of the Fluid 1.x ops (ops/sequence.py's sequence_conv,
ops/vector_norm.py's cos_sim, ops/crf.py's CRF ops, dropout's gradient, ...; runtime/seq.h):
LoD inputs with empty sequences among them. Compiled vs the numpy kernels by
test_emitters.py, gradients through the kernels' gradient ops."""
import numpy as np
from codegen_samples import dims, f32, rng

from fluidity.core.tensor import LoDTensor


def lod(x, lens):
    t = LoDTensor(x)
    t.set_recursive_sequence_lengths([lens])
    return t


def seq_lens():
    """A few sequences, one of them empty, one longer than any context window here."""
    return [int(n) for n in rng.integers(1, 4, int(rng.integers(1, 4)))] + [0, 5]


def seq_conv(k=3, start=-1, trainable=False):
    def sample():
        m, n, lens = 3, int(rng.integers(1, 5)), seq_lens()
        ins = {"X": lod(f32(sum(lens), m), lens), "Filter": f32(k * m, n, lo=-1, hi=1)}
        wrt = ["X", "Filter"]
        if trainable:
            ins["PaddingData"] = f32(max(0, -start) + max(0, start + k - 1), m)
            wrt.append("PaddingData")
        return ins, {"contextLength": k, "contextStart": start,
                     "paddingTrainable": trainable}, wrt
    return sample


def cos_sim(y_rows=None):
    def sample():
        n = int(rng.integers(1, 6))
        return ({"X": f32(n, 2, 3), "Y": f32(y_rows or n, 2, 3)}, {}, ["X", "Y"])
    return sample


def batch_size_like(input_dim_idx=0, lod_input=True, **attrs):
    def sample():
        lens = seq_lens()
        x = f32(sum(lens), 3)
        return ({"Input": lod(x, lens) if lod_input else x},
                {"shape": [-1, 4] if input_dim_idx == 0 else [2, -1, 3],
                 "input_dim_idx": input_dim_idx, "output_dim_idx": 0 if input_dim_idx == 0
                 else 1, "value": 1.5, **attrs}, None)
    return sample


def crf(with_label=True, tags=4):
    """Emission [rows, tags] of LoD sequences (one empty), Transition [tags + 2, tags] and
    a tag per row."""
    def sample():
        lens = seq_lens()
        rows = sum(lens)
        ins = {"Emission": lod(f32(rows, tags), lens),
               "Transition": f32(tags + 2, tags, lo=-1, hi=1)}
        if with_label:
            ins["Label"] = lod(rng.integers(0, tags, (rows, 1)).astype(np.int64), lens)
        return ins, {}, ["Emission", "Transition"] if with_label else None
    return sample


def chunks(scheme="IOB", types=2, excluded=()):
    """Inferred tags and labels (the same but for a few rows) over LoD sequences."""
    def sample():
        lens = seq_lens()
        rows = sum(lens)
        limit = types * {"IOB": 2, "IOE": 2, "IOBES": 4, "plain": 1}[scheme]
        lab = rng.integers(0, limit + 1, (rows, 1)).astype(np.int64)
        inf = lab.copy()
        flip = rng.random(rows) < 0.3
        inf[flip, 0] = rng.integers(0, limit + 1, int(flip.sum()))
        return ({"Inference": lod(inf, lens), "Label": lod(lab, lens)},
                {"chunk_scheme": scheme, "num_chunk_types": types,
                 "excluded_chunk_types": list(excluded)}, None)
    return sample


def seq_rows(width=3, **attrs):
    """X [rows, width] of LoD sequences, for the row-moving sequence ops."""
    def sample():
        lens = seq_lens()
        return {"X": lod(f32(sum(lens), width), lens)}, dict(attrs), ["X"]
    return sample


def repeat_rows():
    """X [one row per sequence of Y, 3] (no LoD), Y of LoD sequences."""
    lens = seq_lens()
    return ({"X": f32(len(lens), 3), "Y": lod(f32(sum(lens), 2), lens)}, {}, ["X"])


def seq_pad(padded_length=-1, row=False):
    def sample():
        ins, attrs, wrt = seq_rows(padded_length=padded_length)()
        ins["PadValue"] = f32(3) if row else np.array([0.5], np.float32)
        return ins, attrs, wrt
    return sample


def seq_ids(hi, win=None):
    lens = seq_lens()
    return lod(rng.integers(0, hi, (sum(lens), 1)).astype(np.int64), lens)


def seq_scatter():
    n = len(seq_lens())
    lens = [int(k) for k in rng.integers(0, 4, n)]
    return ({"X": f32(n, 5), "Ids": lod(rng.integers(0, 5, (sum(lens), 1)).astype(np.int64), lens),
             "Updates": lod(f32(sum(lens), 1), lens)}, {}, ["X", "Updates"])


def pair(x_slot="X", y_slot="Y", lo=-2.0, hi=2.0, rows=None, **attrs):
    """Two same-shaped float inputs (a loss's prediction and target)."""
    def sample():
        n, m = int(rng.integers(1, 6)), rows or int(rng.integers(1, 5))
        return ({x_slot: f32(n, m, lo=lo, hi=hi), y_slot: f32(n, m, lo=lo, hi=hi)}, dict(attrs),
                [x_slot])
    return sample


def with_label(sample, slot, make):
    def wrapped():
        ins, attrs, wrt = sample()
        ins[slot] = make(next(iter(ins.values())).shape)
        return ins, attrs, wrt
    return wrapped


def probs(shape):
    return rng.uniform(0.05, 0.95, shape).astype(np.float32)


def signs(shape):
    return rng.choice(np.array([-1.0, 1.0], np.float32), shape)


def smooth_l1(weights=False, sigma=1.0):
    def sample():
        n = int(rng.integers(1, 5))
        ins = {"X": f32(n, 2, 3), "Y": f32(n, 2, 3)}
        if weights:
            ins.update(InsideWeight=f32(n, 2, 3, lo=0, hi=1),
                       OutsideWeight=f32(n, 2, 3, lo=0, hi=1))
        return ins, {"sigma": sigma}, ["X", "Y"]
    return sample


def bpr():
    n, c = int(rng.integers(1, 5)), int(rng.integers(2, 6))
    return ({"X": f32(n, c), "Label": rng.integers(0, c, (n, 1)).astype(np.int64)}, {}, ["X"])


def kldiv(reduction):
    def sample():
        n, m = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        t = rng.uniform(-0.2, 1.0, (n, m)).astype(np.float32)      # some not > 0
        return {"X": f32(n, m), "Target": t}, {"reduction": reduction}, ["X"]
    return sample


def teacher_student():
    n = int(rng.integers(2, 7))
    label = rng.choice(np.array([-2.0, -0.5, 0.3, 1.6], np.float32), (n, 1))
    return ({"X": f32(n, 1, lo=-20, hi=20), "Label": label},
            {"soft_max_up_bound": 15.0, "soft_max_lower_bound": -15.0}, ["X"])


def hsigmoid(classes=6, bias=True):
    """X [N, 4], W [classes - 1, 4] (one row per inner node of the default tree), labels in
    [0, classes)."""
    def sample():
        n = int(rng.integers(1, 6))
        ins = {"X": f32(n, 4), "W": f32(classes - 1, 4, lo=-1, hi=1),
               "Label": rng.integers(0, classes, (n, 1)).astype(np.int64)}
        if bias:
            ins["Bias"] = f32(classes - 1, 1)
        return ins, {"num_classes": classes}, ["X", "W"] + (["Bias"] if bias else []), \
            ["Out", "PreOut"]
    return sample


def image(c=4, h=4, w=6, **attrs):
    def sample():
        return {"X": f32(int(rng.integers(1, 4)), c, h, w)}, dict(attrs), ["X"]
    return sample


def row_conv(padded=False):
    def sample():
        f = f32(3, 4)
        if padded:
            return {"X": f32(2, 5, 4), "Filter": f}, {}, ["X", "Filter"]
        lens = seq_lens()
        return {"X": lod(f32(sum(lens), 4), lens), "Filter": f}, {}, ["X", "Filter"]
    return sample


def with_nan(x):
    x.reshape(-1)[min(4, x.size - 1)] = np.nan
    return x


SAMPLES = {
    "arg_max": lambda: ({"X": with_nan(f32(3, 4, 5).round())}, {"axis": 1}, None),
    "arg_min": lambda: ({"X": f32(3, 4).round()}, {"axis": -1, "keepdims": True}, None),
    "maxout": image(c=6, groups=3),
    "affine_channel": lambda: ({"X": f32(2, 3, 2, 2), "Scale": f32(3), "Bias": f32(3)}, {},
                               ["X", "Scale", "Bias"]),
    "lrn": lambda: ({"X": f32(2, 6, 2, 3)}, {"n": 5, "k": 1.5, "alpha": 0.01, "beta": 0.75},
                    ["X"]),
    "norm": lambda: ({"X": f32(3, 4, 2)}, {"axis": 1, "epsilon": 1e-10}, ["X"]),
    "row_conv": row_conv(),
    "pad": lambda: ({"X": f32(2, 3, 4)}, {"paddings": [0, 0, 1, 2, 2, 0], "pad_value": -1.5},
                    ["X"]),
    "pad2d": image(paddings=[1, 0, 2, 1], mode="reflect"),
    "crop": image(shape=[1, 2, 3, 4], offsets=[0, 1, 1, 2]),
    "crop_tensor": image(shape=[1, 3, -1, 2], offsets=[0, 1, 1, 3]),
    "space_to_depth": image(blocksize=2),
    "pixel_shuffle": image(upscale_factor=2),
    "shuffle_channel": image(group=2),
    "temporal_shift": lambda: ({"X": f32(4, 4, 2, 3)}, {"seg_num": 2, "shift_ratio": 0.25},
                               ["X"]),
    "hierarchical_sigmoid": hsigmoid(),
    "huber_loss": pair(delta=0.7),
    "smooth_l1_loss": smooth_l1(),
    "log_loss": with_label(lambda: (lambda n: ({"Predicted": probs((n, 1))}, {"epsilon": 1e-4},
                                                ["Predicted"]))(int(rng.integers(1, 6))),
                           "Labels", lambda s: rng.integers(0, 2, s).astype(np.float32)),
    "bce_loss": with_label(lambda: ({"X": probs(dims())}, {}, ["X"]), "Label",
                           lambda s: rng.integers(0, 2, s).astype(np.float32)),
    "rank_loss": with_label(pair("Left", "Right", rows=1), "Label",
                            lambda s: rng.integers(0, 2, s).astype(np.float32)),
    "margin_rank_loss": with_label(pair("X1", "X2", rows=1, margin=0.1), "Label", signs),
    "bpr_loss": bpr,
    "kldiv_loss": kldiv("mean"),
    "teacher_student_sigmoid_loss": teacher_student,
    "label_smooth": lambda: ({"X": probs(dims())}, {"epsilon": 0.1}, ["X"]),
    "sequence_softmax": lambda: (lambda lens: ({"X": lod(f32(sum(lens), 1), lens)}, {},
                                               ["X"]))(seq_lens()),
    "sequence_reverse": seq_rows(),
    "sequence_expand": repeat_rows,
    "sequence_expand_as": repeat_rows,
    "sequence_pad": seq_pad(),
    "sequence_reshape": seq_rows(3, new_dim=3),
    "lod_reset": lambda: (lambda lens: ({"X": f32(sum(lens), 2), "Y": lod(f32(sum(lens), 1), lens)},
                                        {}, ["X"]))(seq_lens()),
    "sequence_mask": lambda: ({"X": rng.integers(0, 6, (4,)).astype(np.int64)}, {"maxlen": 5},
                              None),
    "sequence_enumerate": lambda: ({"X": seq_ids(9)}, {"win_size": 3, "pad_value": -1}, None),
    "sequence_scatter": seq_scatter,
    "linear_chain_crf": crf(),
    "crf_decoding": crf(with_label=False),
    "chunk_eval": chunks(),
    "sequence_conv": seq_conv(),
    "cos_sim": cos_sim(),
    "fill_constant_batch_size_like": batch_size_like(),
}

EXTRA = {
    "sequence_conv trainable padding, window past both ends": (
        "sequence_conv", seq_conv(4, -2, True)),
    "sequence_conv window ahead, zero padding": ("sequence_conv", seq_conv(2, 0)),
    "cos_sim one Y row for every X row": ("cos_sim", cos_sim(1)),
    "crf_decoding with Label": ("crf_decoding", crf(with_label=True)),
    "group_norm and its gradient": ("group_norm", lambda: (
        {"X": f32(2, 6, 3, 4), "Scale": f32(6), "Bias": f32(6)}, {"groups": 3, "epsilon": 1e-5},
        ["X", "Scale", "Bias"], ["Y", "Mean", "Variance"])),
    "group_norm's gradient without scale and bias, 3-D": ("group_norm", lambda: (
        {"X": f32(3, 4, 5)}, {"groups": 2}, ["X"], ["Y", "Mean", "Variance"])),
    "instance_norm and its gradient": ("instance_norm", lambda: (
        {"X": f32(2, 3, 4, 2), "Scale": f32(3), "Bias": f32(3)}, {"epsilon": 1e-5},
        ["X", "Scale", "Bias"], ["Y", "SavedMean", "SavedVariance"])),
    "arg_max flattened int64, int32 out": ("arg_max", lambda: (
        {"X": rng.integers(-3, 3, (3, 4)).astype(np.int64)}, {"flatten": True, "dtype": 2},
        None)),
    "maxout axis 3": ("maxout", image(w=6, groups=2, axis=3)),
    "affine_channel NHWC": ("affine_channel", lambda: (
        {"X": f32(2, 2, 3, 4), "Scale": f32(4), "Bias": f32(4)}, {"data_layout": "NHWC"},
        ["X", "Scale", "Bias"])),
    "norm over the last axis": ("norm", lambda: ({"X": f32(3, 9)}, {"axis": -1}, ["X"])),
    "row_conv padded [B, T, D]": ("row_conv", row_conv(padded=True)),
    "pad2d constant, NHWC": ("pad2d", image(paddings=[0, 2, 1, 1], mode="constant",
                                            pad_value=0.5, data_format="NHWC")),
    "pad2d edge": ("pad2d", image(paddings=[2, 1, 0, 3], mode="edge")),
    "hierarchical_sigmoid 11 classes, no bias": ("hierarchical_sigmoid", hsigmoid(11, False)),
    "smooth_l1_loss weights, sigma 2": ("smooth_l1_loss", smooth_l1(True, 2.0)),
    "kldiv_loss none": ("kldiv_loss", kldiv("none")),
    "kldiv_loss sum": ("kldiv_loss", kldiv("sum")),
    "kldiv_loss batchmean": ("kldiv_loss", kldiv("batchmean")),
    "label_smooth with a prior": ("label_smooth", lambda: (lambda x: (
        {"X": x, "PriorDist": probs((x.shape[1],))}, {"epsilon": 0.2}, ["X"]))(probs(dims()))),
    "sequence_pad to a padded_length, a pad row": ("sequence_pad", seq_pad(7, True)),
    "sequence_mask int32 lengths, float mask": ("sequence_mask", lambda: (
        {"X": rng.integers(0, 4, (2, 3)).astype(np.int32)}, {"maxlen": 3, "out_dtype": 5},
        None)),
    "linear_chain_crf one tag": ("linear_chain_crf", crf(tags=1)),
    "chunk_eval IOBES, 3 types, one excluded": ("chunk_eval", chunks("IOBES", 3, (1,))),
    "chunk_eval IOE": ("chunk_eval", chunks("IOE", 2)),
    "chunk_eval plain": ("chunk_eval", chunks("plain", 3)),
    "fill_constant_batch_size_like dim 1 of a dense Input, int64": (
        "fill_constant_batch_size_like", batch_size_like(1, False, dtype=3, str_value="7")),
    "fill_constant_batch_size_like rows of a dense Input": (
        "fill_constant_batch_size_like", batch_size_like(0, False)),
}

"""Samples of the compiled forms of Fluid 1.x ops that cut segments before (issue 29, the
second list): the 1.x resize ops (bilinear_interp, nearest_interp, bicubic_interp), the CTR
ops cvm and data_norm, the float checks isinf / isnan / isfinite / isfinite_v2, tril_triu, roll,
eye, diag (linspace, whose inputs must be constants, in test_matrix_compiled.py), multiplex,
pad_constant_like, partial_concat, partial_sum,
bilinear_tensor_product, argsort (ties and NaN in the kernel's stable order).
Each compiled vs its numpy kernel by test_emitters.py, forward and gradient."""
import numpy as np
from codegen_samples import f32, ints, rng


def resize(method, shape=(2, 3, 5, 6), **attrs):
    """A Fluid 1.x resize of X `shape` with `attrs`."""
    def sample():
        return {"X": f32(*shape)}, {"interp_method": method, **attrs}, ["X"]
    return sample


SAMPLES = {
    "bilinear_interp": resize("bilinear", out_h=9, out_w=4, align_corners=False,
                              align_mode=0),
    "nearest_interp": resize("nearest", scale=1.5, align_corners=False),
    "bicubic_interp": resize("bicubic", out_h=7, out_w=11, align_corners=False),
}
EXTRA = {
    "bilinear_interp align_corners (default)": ("bilinear_interp", resize(
        "bilinear", out_h=10, out_w=3)),
    "bilinear_interp align_mode 1, scale 2, NHWC": ("bilinear_interp", resize(
        "bilinear", (2, 4, 3, 3), scale=2.0, align_corners=False, align_mode=1,
        data_layout="NHWC")),
    "bilinear_interp same size (a copy)": ("bilinear_interp", resize(
        "bilinear", out_h=5, out_w=6, align_corners=False, align_mode=0)),
    "bilinear_interp to 1x1": ("bilinear_interp", resize("bilinear", out_h=1, out_w=1)),
    "nearest_interp align_corners, NHWC": ("nearest_interp", resize(
        "nearest", (1, 4, 4, 2), out_h=7, out_w=3, data_layout="NHWC")),
    "nearest_interp downsample": ("nearest_interp", resize(
        "nearest", out_h=2, out_w=3, align_corners=False)),
    "bicubic_interp align_corners, NHWC": ("bicubic_interp", resize(
        "bicubic", (1, 4, 5, 2), out_h=9, out_w=3, data_layout="NHWC")),
}


# --- CTR ops -----------------------------------------------------------------------------------
def cvm(shape, use_cvm=True, wrt=True):
    """cvm over X `shape` (show and click counts >= 0 in columns 0, 1) and CVM [rows, 2]."""
    def sample():
        x = f32(*shape)
        x[..., :2] = f32(*shape[:-1], 2, lo=0.0, hi=9.0)
        rows = int(np.prod(shape[:-1]))
        return {"X": x, "CVM": f32(rows, 2, lo=0.0, hi=5.0)}, {"use_cvm": use_cvm}, ["X"] if wrt else None
    return sample


SAMPLES.update({"cvm": cvm((5, 6))})
EXTRA.update({
    "cvm without use_cvm": ("cvm", cvm((4, 7), use_cvm=False)),
    "cvm 3-D X, only the two columns": ("cvm", cvm((2, 3, 2))),
    "cvm without use_cvm, nothing left": ("cvm", cvm((3, 2), False, False)),
})


def data_norm(n=5, c=6, shift=False, slot_dim=-1, wrt=("X",), **attrs):
    """data_norm over X [n, c] with positive statistics (and scale_w, bias with `shift`);
    with slot_dim some slots unused (their first value 0)."""
    def sample():
        x = f32(n, c)
        if slot_dim > 0 and n:
            x[1::2, ::slot_dim] = 0.0            # every other row's slots unused ...
            x[:, 0] = 0.0                        # ... and the first slot in no row
        ins = {"X": x, "BatchSize": f32(c, lo=50.0, hi=200.0),
               "BatchSum": f32(c, lo=-20.0, hi=20.0),
               "BatchSquareSum": f32(c, lo=50.0, hi=200.0)}
        if shift:
            ins.update(scale_w=f32(c, lo=0.5, hi=1.5), bias=f32(c))
        return ins, {"enable_scale_and_shift": shift, "slot_dim": slot_dim, **attrs}, \
            list(wrt) if wrt else None
    return sample


STATS = ("BatchSize", "BatchSum", "BatchSquareSum")
SAMPLES.update({"data_norm": data_norm(wrt=("X",) + STATS)})
EXTRA.update({
    "data_norm scale and shift": ("data_norm", data_norm(
        shift=True, wrt=("X", "scale_w", "bias") + STATS)),
    "data_norm slot_dim 2": ("data_norm", data_norm(6, 6, slot_dim=2, wrt=("X",) + STATS,
                                                    epsilon=0.01)),
    "data_norm slot_dim 3, scale and shift": ("data_norm", data_norm(
        4, 6, True, 3, ("X", "scale_w", "bias") + STATS, summary_decay_rate=0.9)),
    "data_norm one channel, many rows": ("data_norm", data_norm(40, 1, wrt=("X",) + STATS)),
})


# --- float checks ------------------------------------------------------------------------------
def special(*shape, put=(), dtype=np.float32):
    """X of `shape` with the values `put` (inf, nan) at random places."""
    x = rng.uniform(-2, 2, size=shape).astype(dtype)
    flat = x.reshape(-1)
    for v in put:
        flat[int(rng.integers(0, flat.size))] = v
    return x


def check(shape=(4, 5), put=(), make=None, **kw):
    def sample():
        return {"X": make(*shape) if make else special(*shape, put=put, **kw)}, {}, None
    return sample


INF, NAN = np.inf, np.nan
SAMPLES.update({
    "isinf": check(put=(-INF,)),
    "isnan": check(put=(NAN,)),
    "isfinite": check(),
    "isfinite_v2": check(put=(INF, NAN, -INF)),
})
EXTRA.update({
    "isinf none (nan is not inf)": ("isinf", check(put=(NAN,))),
    "isnan none": ("isnan", check(put=(INF,))),
    "isfinite nan": ("isfinite", check((3, 2, 4), put=(NAN,))),
    "isfinite inf float64": ("isfinite", check(put=(INF,), dtype=np.float64)),
    "isinf int64": ("isinf", check(make=ints)),
    "isfinite int64": ("isfinite", check(make=ints)),
    "isfinite empty": ("isfinite", check((0, 3))),
    "isfinite_v2 float64": ("isfinite_v2", check(put=(NAN,), dtype=np.float64)),
    "isfinite_v2 int64": ("isfinite_v2", check(make=ints)),
})


# --- tril_triu, roll, eye, linspace, diag ------------------------------------------------------
def one_x(shape, wrt=True, make=f32, **attrs):
    def sample():
        return {"X": make(*shape)}, attrs, ["X"] if wrt else None
    return sample


F64, I32, I64 = 6, 2, 3      # VarType codes
ELSEWHERE = {"linspace"}        # test_matrix_compiled.py: its inputs must be constants
SAMPLES.update({
    "tril_triu": one_x((2, 4, 5), lower=True, diagonal=1),
    "roll": one_x((3, 4, 5), shifts=[2, -7], axis=[0, -1]),
    "eye": lambda: ({}, {"num_rows": 4, "num_columns": 6}, None),
    "diag": lambda: ({"Diagonal": f32(5)}, {}, None),
})
EXTRA.update({
    "tril_triu upper, negative diagonal": ("tril_triu", one_x((5, 3), diagonal=-2)),
    "tril_triu lower, diagonal past the matrix, int64": ("tril_triu", one_x(
        (3, 4), False, ints, lower=True, diagonal=-9)),
    "roll flattened (no axis), shifts summed": ("roll", one_x((3, 5), shifts=[4, 9])),
    "roll one axis named twice, huge shift": ("roll", one_x((4, 6), shifts=[1, 10 ** 12 + 1],
                                                            axis=[1, 1])),
    "roll int64": ("roll", one_x((6,), False, ints, shifts=[-1], axis=[0])),
    "roll empty": ("roll", one_x((0, 3), False, shifts=[2], axis=[1])),
    "eye square int64": ("eye", lambda: ({}, {"num_rows": 3, "dtype": I64}, None)),
    "eye empty float64": ("eye", lambda: ({}, {"num_rows": 0, "num_columns": 3,
                                               "dtype": F64}, None)),
    "diag int32": ("diag", lambda: ({"Diagonal": ints(4).astype(np.int32)}, {}, None)),
})


# --- multiplex, pad_constant_like --------------------------------------------------------------
def multiplex(k=3, shape=(5, 4), dtype=np.int32, wrt=True):
    def sample():
        ids = rng.integers(0, k, size=(shape[0], 1)).astype(dtype)
        xs = [(f"x{i}", f32(*shape)) for i in range(k)]
        return {"Ids": ids, "X": xs}, {}, [("X", i) for i in range(k)] if wrt else None
    return sample


def pad_like(x_shape, y_shape, wrt=True, **attrs):
    def sample():
        return {"X": f32(*x_shape), "Y": f32(*y_shape)}, attrs, ["Y"] if wrt else None
    return sample


SAMPLES.update({
    "multiplex": multiplex(),
    "pad_constant_like": pad_like((4, 5, 3), (2, 5, 1), pad_value=-1.5),
})
EXTRA.update({
    "multiplex int64 Ids, 3-D rows, one candidate": ("multiplex", multiplex(
        1, (3, 2, 2), np.int64)),
    "pad_constant_like same shape": ("pad_constant_like", pad_like((3, 4), (3, 4))),
    "pad_constant_like 0.1 (the float of the double)": ("pad_constant_like", pad_like(
        (3, 4), (1, 2), pad_value=0.1)),
    "pad_constant_like inf": ("pad_constant_like", pad_like(
        (2, 3), (1, 3), False, pad_value=float("inf"))),
})


# --- partial_concat, partial_sum ---------------------------------------------------------------
def partial(k=3, shape=(4, 6), wrt=True, make=f32, **attrs):
    def sample():
        xs = [(f"x{i}", make(*shape)) for i in range(k)]
        return {"X": xs}, attrs, [("X", i) for i in range(k)] if wrt else None
    return sample


SAMPLES.update({
    "partial_concat": partial(start_index=1, length=3),
    "partial_sum": partial(start_index=2, length=2),
})
EXTRA.update({
    "partial_concat negative start, every column after": ("partial_concat", partial(
        2, start_index=-4)),
    "partial_concat one input, int64": ("partial_concat", partial(1, (3, 5), False, ints,
                                                                  start_index=0, length=5)),
    "partial_sum length -1": ("partial_sum", partial(4, (2, 5), start_index=1)),
    "partial_sum int64": ("partial_sum", partial(2, (3, 4), False, ints, start_index=0,
                                                 length=1)),
})


# --- bilinear_tensor_product -------------------------------------------------------------------
def btp(b=4, m=3, n=5, k=2, bias=True):
    def sample():
        ins = {"X": f32(b, m), "Y": f32(b, n), "Weight": f32(k, m, n)}
        if bias:
            ins["Bias"] = f32(1, k)
        return ins, {}, list(ins)
    return sample


SAMPLES.update({"bilinear_tensor_product": btp()})
EXTRA.update({
    "bilinear_tensor_product without Bias": ("bilinear_tensor_product", btp(3, 4, 2, 5,
                                                                            False)),
    "bilinear_tensor_product one row": ("bilinear_tensor_product", btp(1, 6, 6, 3)),
})


# --- argsort -----------------------------------------------------------------------------------
def tied(*shape):
    """Floats with many ties (the stable order shows) and a NaN or two."""
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[int(rng.integers(0, flat.size))] = np.nan
    flat[int(rng.integers(0, flat.size))] = np.nan
    return x


def argsort(shape, wrt=True, make=f32, **attrs):
    def sample():
        return {"X": make(*shape)}, attrs, ["X"] if wrt else None
    return sample


SAMPLES.update({"argsort": argsort((3, 7))})
EXTRA.update({
    "argsort descending, axis 0": ("argsort", argsort((9, 4), descending=True, axis=0)),
    "argsort ties and NaN": ("argsort", argsort((4, 40), False, tied)),
    "argsort ties and NaN descending, middle axis": ("argsort", argsort(
        (2, 33, 3), False, tied, descending=True, axis=1)),
    "argsort int64 ties": ("argsort", argsort((5, 6), False, lambda *s: rng.integers(
        0, 3, size=s).astype(np.int64), descending=True)),
    "argsort one element lines": ("argsort", argsort((4, 1))),
})

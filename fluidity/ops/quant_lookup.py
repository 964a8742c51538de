"""lookup_table_dequant: an embedding lookup in a table quantized to 8 bits a value, as Fluid
1.8 stores it: each float32 row is [min, max, packed...], where every packed float32 holds four
bytes b (in memory order) that stand for b * (max - min) / 256 + min. A row of D floats gives
(D - 2) * 4 values. padding_idx rows are zeros. No gradient (Fluid has none)."""
import numpy as np

from ..errors import ExecutionError, ShapeError
from .registry import In, OpDef, Out, long

NO_PADDING = -1


class LookupTableDequant(OpDef):
    type = "lookup_table_dequant"
    inputs = (In("W", no_grad=True), In("Ids", no_grad=True))
    outputs = (Out("Out"),)
    attrs = {"padding_idx": long(NO_PADDING)}
    share_lod = "Ids"
    doc = ("Out[..., :] = dequantized row W[Ids[..., 0]] ((D - 2) * 4 values); Ids' last dim "
           "is 1.")

    @staticmethod
    def infer_shape(ctx):
        ws, ids = list(ctx.input_shape("W")), list(ctx.input_shape("Ids"))
        if len(ws) != 2:
            ctx.fail(f"the lookup table W must be 2-D, got W{ws}")
        if not ids or ids[-1] != 1:
            ctx.fail(f"the last dim of Ids must be 1, got Ids{ids}")
        if 0 <= ws[1] < 2:
            ctx.fail(f"W's rows must hold at least min and max (2 columns), got W{ws}")
        width = (ws[1] - 2) * 4 if ws[1] >= 0 else -1
        ctx.set_output("Out", ids[:-1] + [width], ctx.input_dtype("W"))

    @staticmethod
    def kernel(w, ids, *, padding_idx):
        if w.ndim != 2 or w.shape[1] < 2 or w.dtype != np.float32:
            raise ShapeError(f"lookup_table_dequant: W must be float32 [rows, >= 2], got "
                             f"{w.dtype} {list(w.shape)}")
        flat = ids.reshape(-1).astype(np.int64)
        pad = flat == padding_idx if padding_idx != NO_PADDING else np.zeros(flat.shape, bool)
        bad = flat[~pad & ((flat < 0) | (flat >= w.shape[0]))]
        if bad.size:
            raise ExecutionError(f"lookup_table_dequant: id {bad[0]} is out of range for a "
                                 f"table of {w.shape[0]} rows")
        rows = w[np.where(pad, 0, flat)]
        lo, hi = rows[:, :1], rows[:, 1:2]
        codes = np.ascontiguousarray(rows[:, 2:]).view(np.uint8).astype(np.float32)
        out = codes * ((hi - lo) / np.float32(256)) + lo
        out[pad] = 0
        return out.reshape(ids.shape[:-1] + (out.shape[1],)).astype(np.float32)

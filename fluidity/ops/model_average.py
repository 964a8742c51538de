"""average_accumulates: the running sums of parameters behind ModelAverage (fluidity/optimizer.py),
as Paddle 1.8's kernel keeps them, window by window.
"""
from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .optimizer_ops import writable_array
from .registry import In, OpDef, Out, long


class AverageAccumulates(OpDef):
    """ModelAverage's running sums (Paddle's average_accumulates): sum_1 gathers params each
    step; every 16384 updates it moves into sum_2 (for precision); when the window
    (num_accumulates) reaches min(max_average_window, num_updates * average_window) and at
    least min_average_window, sum_3 = sum_1 + sum_2 and sums 1, 2 restart."""
    type = "average_accumulates"
    kind = "value"
    share_lod = None
    inputs = (In("param"), In("in_sum_1"), In("in_sum_2"), In("in_sum_3"),
              In("in_num_accumulates"), In("in_old_num_accumulates"), In("in_num_updates"))
    outputs = (Out("out_sum_1"), Out("out_sum_2"), Out("out_sum_3"),
               Out("out_num_accumulates"), Out("out_old_num_accumulates"),
               Out("out_num_updates"))
    attrs = {"average_window": 0.0, "max_average_window": long(2 ** 63 - 1),
             "min_average_window": long(10000)}
    K_MAX_NUM_ACCUMULATES = 16384

    @staticmethod
    def infer_shape(ctx):
        for i, o in zip(AverageAccumulates.inputs[1:], AverageAccumulates.outputs):
            ctx.share(i.name, o.name)

    @classmethod
    def prepare(cls, attrs, outputs):
        window, max_w, min_w = (attrs["average_window"], attrs["max_average_window"],
                                attrs["min_average_window"])

        def kernel(param, s1, s2, s3, n_acc, old_n, n_upd):
            op = cls.type
            p = param._array if isinstance(param, LoDTensor) else None
            if p is None:
                raise ExecutionError(f"{op}: param holds no data")
            a1, a2, a3 = (writable_array(t, op, n) for t, n in
                          ((s1, "in_sum_1"), (s2, "in_sum_2"), (s3, "in_sum_3")))
            cnt = [writable_array(t, op, n) for t, n in
                   ((n_acc, "in_num_accumulates"), (old_n, "in_old_num_accumulates"),
                    (n_upd, "in_num_updates"))]
            num_acc, old, num_upd = (int(c.reshape(-1)[0]) + (1 if i != 1 else 0)
                                     for i, c in enumerate(cnt))
            a1 += p
            if num_upd % cls.K_MAX_NUM_ACCUMULATES == 0:
                a2 += a1
                a1[...] = 0
            if num_acc >= min_w and num_acc >= min(max_w, num_upd * window):
                a3[...] = a1 + a2
                a1[...] = 0
                a2[...] = 0
                old, num_acc = num_acc, 0
            for c, v in zip(cnt, (num_acc, old, num_upd)):
                c.reshape(-1)[0] = v
            return s1, s2, s3, n_acc, old_n, n_upd
        return kernel

"""lstmp (projected LSTM) against a step-by-step numpy reference of its definition, over LoD
sequences (an empty one included), forward and reverse, with and without peepholes, initial
states and clipping; its numeric gradients; bad input."""
import numpy as np
import pytest

from fluidity.core.tensor import LoDTensor
from fluidity.errors import ExecutionError, ShapeError
from op_test import check_grad, check_output, run_op

rng = np.random.default_rng(14)
ACT = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh,
       "relu": lambda v: np.maximum(v, 0), "identity": lambda v: v}


def lstmp_ref(x, lens, w, pw, b, h0, c0, peep, reverse, cell_clip, proj_clip,
              gate="sigmoid", cell="tanh", cand="tanh", proj="tanh"):
    d, p = pw.shape
    proj_out, cell_out = np.zeros((len(x), p)), np.zeros((len(x), d))
    start = 0
    for i, n in enumerate(lens):
        r = h0[i] if h0 is not None else np.zeros(p)
        c = c0[i] if c0 is not None else np.zeros(d)
        steps = range(start + n - 1, start - 1, -1) if reverse else range(start, start + n)
        for t in steps:
            g = x[t] + b[0, :4 * d] + r @ w
            wic, wfc, woc = (b[0, 4 * d:5 * d], b[0, 5 * d:6 * d], b[0, 6 * d:]) if peep \
                else (0, 0, 0)
            i_g = ACT[gate](g[d:2 * d] + wic * c)
            f_g = ACT[gate](g[2 * d:3 * d] + wfc * c)
            c = f_g * c + i_g * ACT[cand](g[:d])
            if cell_clip > 0:
                c = np.clip(c, -cell_clip, cell_clip)
            o_g = ACT[gate](g[3 * d:] + woc * c)
            h = o_g * ACT[cell](c)
            r = ACT[proj](h @ pw)
            if proj_clip > 0:
                r = np.clip(r, -proj_clip, proj_clip)
            proj_out[t], cell_out[t] = r, c
        start += n
    return proj_out, cell_out


def make(lens, d=3, p=2, peep=True, initial=False):
    t = sum(lens)
    ins = {"Input": LoDTensor(rng.normal(size=(t, 4 * d)), [np.cumsum([0] + lens).tolist()]),
           "Weight": rng.normal(scale=0.5, size=(p, 4 * d)),
           "ProjWeight": rng.normal(scale=0.5, size=(d, p)),
           "Bias": rng.normal(scale=0.5, size=(1, (7 if peep else 4) * d))}
    if initial:
        ins["H0"] = rng.normal(size=(len(lens), p))
        ins["C0"] = rng.normal(size=(len(lens), d))
    return ins


@pytest.mark.parametrize("peep,reverse,initial", [(True, False, False), (False, True, True),
                                                  (True, True, True)])
def test_lstmp_forward_and_gradients(peep, reverse, initial):
    lens = [2, 0, 3]
    ins = make(lens, peep=peep, initial=initial)
    attrs = {"use_peepholes": peep, "is_reverse": reverse}
    want_p, want_c = lstmp_ref(ins["Input"]._array, lens, ins["Weight"], ins["ProjWeight"],
                               ins["Bias"], ins.get("H0"), ins.get("C0"), peep, reverse, 0, 0)
    got = check_output("lstmp", ins, {"Projection": want_p, "Cell": want_c}, attrs, atol=1e-10,
                       outputs=["Projection", "Cell", "BatchGate", "BatchCellPreAct",
                                "BatchHidden"])
    assert got["Projection"].shape == (5, 2)
    wrt = ["Input", "Weight", "ProjWeight", "Bias"] + (["H0", "C0"] if initial else [])
    check_grad("lstmp", ins, wrt, attrs, output_slots=["Projection", "Cell"])


def test_lstmp_clipping_and_activations():
    lens = [3, 2]
    ins = make(lens, d=2, p=3, initial=True)
    ins["Input"] = LoDTensor(ins["Input"]._array * 3, ins["Input"]._lod)
    attrs = {"cell_clip": 0.7, "proj_clip": 0.2, "proj_activation": "identity",
             "candidate_activation": "relu"}
    want_p, want_c = lstmp_ref(ins["Input"]._array, lens, ins["Weight"], ins["ProjWeight"],
                               ins["Bias"], ins["H0"], ins["C0"], True, False, 0.7, 0.2,
                               cand="relu", proj="identity")
    assert (np.abs(want_c) == 0.7).any() and (np.abs(want_p) == 0.2).any()
    check_output("lstmp", ins, {"Projection": want_p, "Cell": want_c}, attrs, atol=1e-10,
                 outputs=["Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden"])
    check_grad("lstmp", ins, ["Input", "Weight", "ProjWeight", "H0", "C0"], attrs,
               output_slots=["Projection"])


def test_lstmp_bad_input():
    ins = make([2, 1])
    with pytest.raises(ShapeError, match="Bias must be"):
        run_op("lstmp", dict(ins, Bias=np.zeros((1, 5))),
               outputs=["Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden"])
    with pytest.raises(ExecutionError, match="no LoD"):
        run_op("lstmp", dict(ins, Input=ins["Input"]._array),
               outputs=["Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden"])
    with pytest.raises(ShapeError, match="given together"):
        run_op("lstmp", dict(ins, H0=np.zeros((2, 2))),
               outputs=["Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden"])

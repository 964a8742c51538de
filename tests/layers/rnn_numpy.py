"""Numpy references for the cell API's tests: Fluid's LSTM and GRU steps (BasicLSTMUnit /
BasicGRUUnit), an RNN over padded batches with Fluid's masking, greedy decoding and Fluid
1.8's beam search (dynamic_decode + BeamSearchDecoder), written from the formulas."""
import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_step(x, h, c, w, b, forget_bias=1.0):
    """(h', c'): gates [i, j, f, o] = [x, h] w + b."""
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ w + b, 4, axis=1)
    c2 = c * sigmoid(f + forget_bias) + sigmoid(i) * np.tanh(j)
    return np.tanh(c2) * sigmoid(o), c2


def gru_step(x, h, gw, gb, cw, cb):
    """h': [r, u] = sigmoid([x, h] gw + gb), m = tanh([x, r h] cw + cb)."""
    r, u = np.split(sigmoid(np.concatenate([x, h], 1) @ gw + gb), 2, axis=1)
    m = np.tanh(np.concatenate([x, r * h], 1) @ cw + cb)
    return u * h + (1 - u) * m


def run_rnn(step, xs, states, lengths=None, reverse=False):
    """Fluid's rnn() over xs [batch, time, ...]: `step(x_t, states) -> (out, new states)`
    (states a list); past a sequence's length (with `lengths`) its states are kept.
    Returns (outputs [batch, time, ...], final states)."""
    n, t = xs.shape[:2]
    order = range(t - 1, -1, -1) if reverse else range(t)
    outs = [None] * t
    for k, s in enumerate(order):
        out, new = step(xs[:, s], states)
        if lengths is not None:
            # the mask of position `s` (reversed inputs with reversed masks: the same)
            m = (s < lengths).astype(xs.dtype)[:, None]
            new = [nv * m + ov * (1 - m) for nv, ov in zip(new, states)]
        states = new
        outs[s] = out
    return np.stack(outs, 1), states


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def greedy_decode(cell_step, embed, logits_of, states, start, end, max_step_num):
    """Fluid's dynamic_decode(BasicDecoder(GreedyEmbeddingHelper)) with is_test: returns
    (sample ids [batch, steps], lengths [batch])."""
    n = states[0].shape[0]
    ids = np.full(n, start)
    finished = np.zeros(n, bool)
    lengths = np.zeros(n, np.int64)
    out, step = [], 0
    while True:
        h, states = cell_step(embed(ids), states)
        ids = logits_of(h).argmax(-1)
        out.append(ids)
        lengths += ~finished
        finished = finished | (ids == end)
        step += 1
        if finished.all() or step > max_step_num:
            break
    return np.stack(out, 1), lengths


def beam_search(cell_step, embed, logits_of, states, start, end, beam, max_step_num,
                kinf=1e9):
    """Fluid 1.8's BeamSearchDecoder under dynamic_decode: returns the predicted ids
    [batch, steps, beam] (gather_tree's back-tracked beams) and the final log probs."""
    n = states[0].shape[0]
    states = [np.repeat(s[:, None], beam, 1) for s in states]         # [n, beam, h]
    log_probs = np.tile(np.array([0.0] + [-kinf] * (beam - 1)), (n, 1))
    finished = np.zeros((n, beam), bool)
    ids = np.full((n, beam), start)
    step_ids, parents, step = [], [], 0
    while True:
        merged = [s.reshape(n * beam, -1) for s in states]
        h, new = cell_step(embed(ids.reshape(-1)), merged)
        logits = logits_of(h).reshape(n, beam, -1)
        v = logits.shape[-1]
        lp = log_softmax(logits)
        noend = np.full(v, -kinf)
        noend[end] = 0
        lp = np.where(finished[:, :, None], noend, lp)
        scores = (lp + log_probs[:, :, None]).reshape(n, -1)
        top = np.argsort(-scores, axis=1, kind="stable")[:, :beam]
        parent, token = top // v, top % v
        rows = np.arange(n)[:, None]
        log_probs = scores[rows, top]
        states = [s.reshape(n, beam, -1)[rows, parent] for s in new]
        finished = finished[rows, parent] | (token == end)
        ids = token
        step_ids.append(token)
        parents.append(parent)
        step += 1
        if finished.all() or step > max_step_num:
            break
    return gather_tree(np.stack(step_ids), np.stack(parents)).transpose(1, 0, 2), log_probs


def gather_tree(ids, parents):
    """ids, parents [time, batch, beam] -> the tokens along each final beam's path."""
    t, n, k = ids.shape
    out = np.empty_like(ids)
    for b in range(n):
        for j in range(k):
            p = j
            for s in range(t - 1, -1, -1):
                out[s, b, j] = ids[s, b, p]
                p = parents[s, b, p]
    return out

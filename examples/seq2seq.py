"""Sequence to sequence: learn to reverse token sequences, then decode greedily in a loop.

An encoder and a decoder, each a GRU cell (built from fc layers) run by a DynamicRNN over
variable-length sequences fed as LoDTensors (no padding). Training uses teacher forcing: the
decoder reads <s> + the reversed source and predicts the reversed source + </s>, starting
from the encoder's last state. Inference is a second program sharing the parameters (by
name) whose decoder is a `While` loop: feed back the arg-max token each step, stop when every
sequence has produced </s> or after `max_len` steps, collecting tokens in a tensor array.

    .venv/bin/python examples/seq2seq.py [--steps 600]
"""
import argparse
import time

import numpy as np

import fluidity as fluid
from fluidity.executor.scalars import ScalarWriter

L = fluid.layers
START, END = 0, 1           # token ids; 2 .. VOCAB-1 are the symbols to reverse
VOCAB, EMB, HID = 10, 16, 64


def make_batch(rng, n, min_len=2, max_len=6):
    """Random source sequences; targets are them reversed. Returns LoD int64 [N, 1] tensors
    (source, decoder input <s>+rev, decoder label rev+</s>) and the raw lists."""
    srcs = [rng.integers(2, VOCAB, rng.integers(min_len, max_len + 1)).tolist()
            for _ in range(n)]

    def lod(seqs):
        flat = np.array([t for s in seqs for t in s], "int64").reshape(-1, 1)
        return fluid.create_lod_tensor(flat, [[len(s) for s in seqs]])
    rev = [s[::-1] for s in srcs]
    return (lod(srcs), lod([[START] + r for r in rev]), lod([r + [END] for r in rev]), srcs)


def gru_cell(x, h, prefix):
    """h' = z*h + (1-z)*c, c = tanh(W[x, r*h]), [z, r] = sigmoid(W'[x, h])."""
    gates = L.fc([x, h], 2 * HID, act="sigmoid",
                 param_attr=[f"{prefix}.gx", f"{prefix}.gh"], bias_attr=f"{prefix}.gb")
    z, r = L.split(gates, 2, dim=1)
    c = L.fc([x, r * h], HID, act="tanh",
             param_attr=[f"{prefix}.cx", f"{prefix}.ch"], bias_attr=f"{prefix}.cb")
    return z * h + (1.0 - z) * c


def embed(ids):
    return L.embedding(ids, [VOCAB, EMB], param_attr="emb")


def encoder(src):
    emb = embed(src)
    rnn = L.DynamicRNN()
    with rnn.block():
        x = rnn.step_input(emb)
        h = rnn.memory(shape=[HID])
        nh = gru_cell(x, h, "enc")
        rnn.update_memory(h, nh)
        rnn.output(nh)
    return L.sequence_last_step(rnn())            # [batch, HID]


def logits_of(h):
    return L.fc(h, VOCAB, param_attr="out.w", bias_attr="out.b")


def build_train(lr=0.01, seed=1):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup):
        src = L.data("src", [1], dtype="int64", lod_level=1)
        dec_in = L.data("dec_in", [1], dtype="int64", lod_level=1)
        label = L.data("label", [1], dtype="int64", lod_level=1)
        state = encoder(src)
        emb = embed(dec_in)
        rnn = L.DynamicRNN()
        with rnn.block():
            x = rnn.step_input(emb)
            h = rnn.memory(init=state, need_reorder=True)
            nh = gru_cell(x, h, "dec")
            rnn.update_memory(h, nh)
            rnn.output(nh)
        loss = L.mean(L.softmax_with_cross_entropy(logits_of(rnn()), label))
        fluid.optimizer.Adam(lr).minimize(loss)
    return main, startup, loss


def build_decode(max_len=10):
    """Greedy decoding: a While loop over steps; returns the program and the token array."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        src = L.data("src", [1], dtype="int64", lod_level=1)
        state = encoder(src)
        h = L.assign(state)
        token = L.fill_constant_batch_size_like(state, [-1, 1], "int64", START)
        done = L.fill_constant_batch_size_like(state, [-1, 1], "bool", 0)
        tokens = L.create_array("int64")
        step = L.fill_constant([1], "int64", 0)
        limit = L.fill_constant([1], "int64", max_len)
        go = L.less_than(step, limit)
        loop = L.While(go, is_test=True)       # inference: no step scopes kept
        with loop.block():
            nh = gru_cell(embed(token), h, "dec")
            nt = L.reshape(L.argmax(logits_of(nh), axis=1), [-1, 1])
            L.array_write(nt, step, tokens)
            end = L.equal(nt, L.fill_constant([1], "int64", END))
            L.assign(L.logical_or(done, end), done)
            L.assign(nh, h)
            L.assign(nt, token)
            L.increment(step, in_place=True)
            all_done = L.reduce_min(L.cast(done, "float32"))
            L.logical_and(L.less_than(step, limit),
                          L.logical_not(L.greater_than(all_done,
                                                       L.fill_constant([1], "float32", 0.5))),
                          out=go)
    return main, tokens


def decode(exe, program, tokens, src, scope):
    """(token lists cut at </s>, number of loop steps run). The loop's output is one
    [batch, 1] array per step."""
    steps, = exe.run(program, feed={"src": src}, fetch_list=[tokens], scope=scope)
    grid = np.concatenate(steps, axis=1)          # [batch, steps]
    out = [row[:row.index(END)] if END in row else row for row in grid.tolist()]
    return out, len(steps)


def train(steps=600, batch=64, seed=0, verbose=True, eval_n=200, tensorboard=""):
    rng = np.random.default_rng(seed)
    main, startup, loss = build_train()
    decoder, tokens = build_decode()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    losses, t0 = [], time.perf_counter()
    writer = ScalarWriter(tensorboard) if tensorboard else None
    for k in range(steps):
        src, dec_in, label, _ = make_batch(rng, batch)
        (l,) = exe.run(main, feed={"src": src, "dec_in": dec_in, "label": label},
                       fetch_list=[loss], scope=scope)
        losses.append(float(np.asarray(l).reshape(-1)[0]))
        if writer:
            writer.add_scalar("loss", losses[-1], k + 1)
        if verbose and (k + 1) % 100 == 0:
            print(f"step {k + 1:4d}  loss {np.mean(losses[-100:]):.4f}  "
                  f"({time.perf_counter() - t0:.1f}s)")
    src, _, _, srcs = make_batch(np.random.default_rng(seed + 1000), eval_n)
    got, _ = decode(exe, decoder, tokens, src, scope)
    exact = np.mean([g == s[::-1] for g, s in zip(got, srcs)])
    if writer:
        writer.add_scalar("held_out_exact_match", exact, steps)
        writer.close()
    if verbose:
        for s, g in list(zip(srcs, got))[:5]:
            print(f"  {s} -> {g}")
        print(f"held-out exact-match accuracy: {exact:.3f}")
    return losses, exact


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--steps", type=int, default=600, help="training batches")
    ap.add_argument("--seed", type=int, default=0, help="the data's and the model's seed")
    ap.add_argument("--tensorboard", default="", metavar="DIR",
                    help="write TensorBoard scalars (loss) to DIR (pip install 'fluidity[tensorboard]')")
    args = ap.parse_args()
    train(args.steps, seed=args.seed, tensorboard=args.tensorboard)

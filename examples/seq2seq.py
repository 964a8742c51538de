"""Sequence to sequence: learn to reverse token sequences, then decode them, two ways.

**The cell API (the default, `--api cell`)**, Fluid 1.6-1.8's: padded batches [batch, time]
with their lengths. The encoder is `layers.rnn(LSTMCell)` over the source (its states stop
at each sequence's end: `sequence_length`); the decoder is another `LSTMCell`, trained with
teacher forcing by `layers.rnn` (it reads <s> + the reversed source and predicts the
reversed source + </s>, starting from the encoder's final states; the loss is masked past
each target's end). Decoding programs share the parameters by name (the cells declare
theirs in every program they are used in) and run `layers.dynamic_decode`:

* greedy: `BasicDecoder(cell, GreedyEmbeddingHelper)` feeds back each step's arg max;
* beam search: `BeamSearchDecoder(cell, beam_size=k)` keeps the k best hypotheses per
  sequence (beam 1 gives the greedy result).

Training and decoding run compiled (`CompiledProgram(...).with_native_code()`: a training
step, and a batch's greedy or beam-search decoding, are one native call each, the decoding
loop bounded by max_step_num; `--interpreted` runs everything in Python, with the same
results).

**LoD sequences (`--api lod`)**, Fluid 1.x's older way: an encoder and a decoder, each a GRU
cell (fc layers) run by a DynamicRNN over LoDTensors (no padding), teacher forcing as above;
greedy decoding is a `While` loop that feeds back the arg max until every sequence has
produced </s> or after `max_len` steps. Compiled, a training step (both loops and their
gradients) and a batch's decoding (the loop and its token array) are one native call each.

    .venv/bin/python examples/seq2seq.py [--steps 300] [--beam-size 4]
    .venv/bin/python examples/seq2seq.py --api lod [--steps 600]
"""
import argparse
import time

import numpy as np

import fluidity as fluid
from fluidity.executor.scalars import ScalarWriter

L = fluid.layers
START, END = 0, 1           # token ids; 2 .. VOCAB-1 are the symbols to reverse
VOCAB, EMB, HID = 10, 16, 64


def random_sources(rng, n, min_len=2, max_len=6):
    """n random sequences of 2 .. VOCAB-1 of lengths min_len .. max_len."""
    return [rng.integers(2, VOCAB, rng.integers(min_len, max_len + 1)).tolist()
            for _ in range(n)]


def make_batch(rng, n, min_len=2, max_len=6):
    """Random source sequences; targets are them reversed. Returns LoD int64 [N, 1] tensors
    (source, decoder input <s>+rev, decoder label rev+</s>) and the raw lists."""
    srcs = random_sources(rng, n, min_len, max_len)

    def lod(seqs):
        flat = np.array([t for s in seqs for t in s], "int64").reshape(-1, 1)
        return fluid.create_lod_tensor(flat, [[len(s) for s in seqs]])
    rev = [s[::-1] for s in srcs]
    return (lod(srcs), lod([[START] + r for r in rev]), lod([r + [END] for r in rev]), srcs)


# ---------------------------------------------------------------------------------------
# LoD sequences: DynamicRNN and a greedy While loop
# ---------------------------------------------------------------------------------------
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


def train(steps=600, batch=64, seed=0, verbose=True, eval_n=200, tensorboard="",
          native=True):
    """The LoD model: train, then decode held-out sequences greedily (compiled unless
    native=False: each a single native call per batch). (losses, exact-match accuracy)."""
    rng = np.random.default_rng(seed)
    main, startup, loss = build_train()
    decoder, tokens = build_decode()
    program = compiled(main, native, ["src", "dec_in", "label"], [loss])
    decoding = compiled(decoder, native, ["src"], [tokens])
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    losses, t0 = [], time.perf_counter()
    writer = ScalarWriter(tensorboard) if tensorboard else None
    for k in range(steps):
        src, dec_in, label, _ = make_batch(rng, batch)
        (l,) = exe.run(program, feed={"src": src, "dec_in": dec_in, "label": label},
                       fetch_list=[loss], scope=scope)
        losses.append(float(np.asarray(l).reshape(-1)[0]))
        if writer:
            writer.add_scalar("loss", losses[-1], k + 1)
        if verbose and (k + 1) % 100 == 0:
            print(f"step {k + 1:4d}  loss {np.mean(losses[-100:]):.4f}  "
                  f"({time.perf_counter() - t0:.1f}s)")
    src, _, _, srcs = make_batch(np.random.default_rng(seed + 1000), eval_n)
    got, _ = decode(exe, decoding, tokens, src, scope)
    exact = np.mean([g == s[::-1] for g, s in zip(got, srcs)])
    if writer:
        writer.add_scalar("held_out_exact_match", exact, steps)
        writer.close()
    if verbose:
        for s, g in list(zip(srcs, got))[:5]:
            print(f"  {s} -> {g}")
        print(f"held-out exact-match accuracy: {exact:.3f}")
    return losses, exact




# ---------------------------------------------------------------------------------------
# The cell API: padded batches, layers.rnn, dynamic_decode (greedy and beam search)
# ---------------------------------------------------------------------------------------
def padded_batch(srcs):
    """Feeds of the cell-API programs for the sources `srcs`: src [N, T] (padded with END),
    src_len [N], and the teacher-forcing target: trg_in (<s> + reversed) [N, T + 1],
    trg_len [N] and label (reversed + </s>) [N, T + 1, 1]."""
    n, t = len(srcs), max(len(s) for s in srcs)
    src = np.full((n, t), END, "int64")
    trg_in = np.full((n, t + 1), END, "int64")
    label = np.full((n, t + 1), END, "int64")
    for i, s in enumerate(srcs):
        rev = s[::-1]
        src[i, :len(s)] = s
        trg_in[i, :len(s) + 1] = [START] + rev
        label[i, :len(s) + 1] = rev + [END]
    lens = np.array([len(s) for s in srcs], "int64")
    return {"src": src, "src_len": lens, "trg_in": trg_in, "trg_len": lens + 1,
            "label": label[:, :, None]}


class CellSeq2Seq:
    """An LSTM encoder-decoder written with the cell API. The cells are made once; each
    program built with them (training, greedy decoding, beam search) declares the same
    parameters, so all of them read the trained values from one scope."""

    def __init__(self, emb=EMB, hidden=HID):
        self.emb, self.hidden = emb, hidden
        self.encoder_cell = L.LSTMCell(hidden, name="encoder")
        self.decoder_cell = L.LSTMCell(hidden, name="decoder")

    def embed_source(self, ids):
        return fluid.embedding(ids, [VOCAB, self.emb], param_attr="src_emb")

    def embed_target(self, ids):
        return fluid.embedding(ids, [VOCAB, self.emb], param_attr="trg_emb")

    def logits(self, h):
        return L.fc(h, VOCAB, num_flatten_dims=len(h.shape) - 1, param_attr="out_w",
                    bias_attr="out_b")

    def encode(self, src, src_len):
        """The encoder's final states [h, c], each [batch, hidden] (at each source's end)."""
        _, final_states = L.rnn(self.encoder_cell, self.embed_source(src),
                                sequence_length=src_len)
        return final_states

    def inputs(self):
        return (fluid.data("src", [None, None], "int64"),
                fluid.data("src_len", [None], "int64"))

    def build_train(self, lr=0.01, seed=1):
        """(program, startup, loss): teacher forcing, the loss averaged over real steps."""
        main, startup = fluid.Program(), fluid.Program()
        main.random_seed = startup.random_seed = seed
        with fluid.program_guard(main, startup):
            src, src_len = self.inputs()
            trg_in = fluid.data("trg_in", [None, None], "int64")
            trg_len = fluid.data("trg_len", [None], "int64")
            label = fluid.data("label", [None, None, 1], "int64")
            dec_out, _ = L.rnn(self.decoder_cell, self.embed_target(trg_in),
                               initial_states=self.encode(src, src_len))
            xent = L.softmax_with_cross_entropy(self.logits(dec_out), label)  # [N, T, 1]
            mask = L.sequence_mask(trg_len, maxlen=L.shape(trg_in)[1], dtype="float32")
            loss = L.reduce_sum(L.squeeze(xent, [2]) * mask) / L.reduce_sum(mask)
            fluid.optimizer.Adam(lr).minimize(loss)
        return main, startup, loss

    def build_decode(self, beam_size=None, max_len=10):
        """(program, ids): ids [batch, steps] of greedy decoding (beam_size None), or
        [batch, steps, beam] of beam search, best beam first. Decoding stops when every
        sequence has produced </s>, or after max_len + 1 steps."""
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            src, src_len = self.inputs()
            states = self.encode(src, src_len)
            if beam_size is None:
                start = L.fill_constant_batch_size_like(src, [-1], "int64", START)
                helper = L.GreedyEmbeddingHelper(self.embed_target, start, END)
                decoder = L.BasicDecoder(self.decoder_cell, helper, output_fn=self.logits)
            else:
                decoder = L.BeamSearchDecoder(self.decoder_cell, START, END, beam_size,
                                              embedding_fn=self.embed_target,
                                              output_fn=self.logits)
            outputs, _ = L.dynamic_decode(decoder, inits=states, max_step_num=max_len,
                                          is_test=True)
            ids = outputs.sample_ids if beam_size is None else outputs
        return main, ids


def cut_at_end(rows):
    """Token lists cut before the first </s>."""
    return [r[:r.index(END)] if END in r else r for r in rows]


def decode_cells(exe, program, ids, srcs, scope):
    """Decoded token lists (beam search: the best beam) for the sources `srcs`."""
    feed = padded_batch(srcs)
    got, = exe.run(program, feed={"src": feed["src"], "src_len": feed["src_len"]},
                   fetch_list=[ids], scope=scope)
    if got.ndim == 3:
        got = got[:, :, 0]
    return cut_at_end(got.tolist())


def compiled(program, native, feed, fetch):
    """`program` to run compiled where its ops compile (or as it is)."""
    return fluid.CompiledProgram(program).with_native_code(feed=feed, fetch_list=fetch) \
        if native else program


def train_cells(steps=300, batch=64, seed=0, beam_size=4, native=True, verbose=True,
                eval_n=200):
    """The cell-API model: train, then decode held-out sequences greedily and with beam
    search (compiled unless native=False). Returns (losses, {decoder: exact-match
    accuracy}, model, scope)."""
    rng = np.random.default_rng(seed)
    model = CellSeq2Seq()
    main, startup, loss = model.build_train()
    program = compiled(main, native, ["src", "src_len", "trg_in", "trg_len", "label"], [loss])
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    losses, t0 = [], time.perf_counter()
    for k in range(steps):
        (l,) = exe.run(program, feed=padded_batch(random_sources(rng, batch)),
                       fetch_list=[loss], scope=scope)
        losses.append(float(np.asarray(l).reshape(-1)[0]))
        if verbose and (k + 1) % 50 == 0:
            print(f"step {k + 1:4d}  loss {np.mean(losses[-50:]):.4f}  "
                  f"({time.perf_counter() - t0:.1f}s)")
    srcs = random_sources(np.random.default_rng(seed + 1000), eval_n)
    accuracy = {}
    for name, k in (("greedy", None), (f"beam search ({beam_size})", beam_size)):
        program, ids = model.build_decode(beam_size=k)
        got = decode_cells(exe, compiled(program, native, ["src", "src_len"], [ids]), ids,
                           srcs, scope)
        accuracy[name] = float(np.mean([g == s[::-1] for g, s in zip(got, srcs)]))
        if verbose:
            for s, g in list(zip(srcs, got))[:3]:
                print(f"  {name}: {s} -> {g}")
    if verbose:
        for name, acc in accuracy.items():
            print(f"held-out exact-match accuracy, {name}: {acc:.3f}")
    return losses, accuracy, model, scope


if __name__ == "__main__":
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog="The task: reverse sequences of 2 to 6 symbols (8 symbols; chance of an exact "
               "reversal is under 1/64).")
    ap.add_argument("--api", choices=["cell", "lod"], default="cell",
                    help="cell: LSTMCell + rnn + dynamic_decode (greedy and beam search); "
                         "lod: DynamicRNN over LoD sequences + a greedy While loop")
    ap.add_argument("--steps", type=int, default=None,
                    help="training steps (None: 300 for cell, 600 for lod)")
    ap.add_argument("--batch", type=int, default=64, help="sequences per step")
    ap.add_argument("--beam-size", type=int, default=4, help="beam width (cell)")
    ap.add_argument("--interpreted", action="store_true",
                    help="train and decode without native code")
    ap.add_argument("--seed", type=int, default=0, help="the data's and the model's seed")
    ap.add_argument("--tensorboard", default="", metavar="DIR",
                    help="write TensorBoard scalars (loss) to DIR (lod; pip install "
                         "'fluidity[tensorboard]')")
    args = ap.parse_args()
    if args.api == "cell":
        train_cells(args.steps or 300, batch=args.batch, seed=args.seed,
                    beam_size=args.beam_size, native=not args.interpreted)
    else:
        train(args.steps or 600, batch=args.batch, seed=args.seed,
              tensorboard=args.tensorboard, native=not args.interpreted)

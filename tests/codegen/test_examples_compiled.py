"""The examples' training programs run compiled (`with_native_code()`) as they run
interpreted: a few steps from the same initial parameters give the same losses and
parameters (float32 tolerance: compiled matmuls may call BLAS with other shapes than numpy's
batched ones). Ops that stay Python steps are listed by explain(), and the ones that must
compile do."""
import os
import sys

import numpy as np
import pytest
from op_test import reset_random_states
from paths import EXAMPLES

import fluidity as fluid

sys.path.insert(0, EXAMPLES)
from ctr_dnn import build_ctr_dnn  # noqa: E402
from digits import build, cnn, mlp  # noqa: E402
from seq2seq import build_train, make_batch  # noqa: E402
from sentiment_lstm import build_model  # noqa: E402
from textcls import build_textcls  # noqa: E402
from word2vec import build_word2vec  # noqa: E402

rng = np.random.default_rng(0)


def lod(ids, lens):
    return fluid.create_lod_tensor(np.asarray(ids, np.int64).reshape(-1, 1), [list(lens)])


def seqs(n, vocab, lo=1, hi=5):
    lens = rng.integers(lo, hi, n).tolist()
    return lod(rng.integers(0, vocab, sum(lens)), lens)


def digits(net):
    main, startup, _, loss, _ = build(net)
    return main, startup, loss, lambda: {
        "img": rng.random((16, 8, 8), dtype=np.float32),
        "label": rng.integers(0, 10, (16, 1)).astype(np.int64)}


def ctr(optimizer):
    slots = [f"s{k}" for k in range(4)]
    main, startup, _, v = build_ctr_dnn(slots, dense_dim=5, vocab=1000, hidden=(32, 16),
                                        optimizer=optimizer, with_auc=False)

    def feed():
        f = {s: seqs(8, 1000) for s in slots}
        f.update(dense_input=rng.random((8, 5), dtype=np.float32),
                 click=rng.integers(0, 2, (8, 1)).astype(np.int64))
        return f
    return main, startup, v["loss"], feed


def sentiment():
    main, startup, _, loss, _ = build_model(200, emb_dim=8, hidden=8)
    return main, startup, loss, lambda: {"words": seqs(6, 200),
                                         "label": rng.integers(0, 2, (6, 1)).astype(np.int64)}


def textcls():
    main, startup, _, v = build_textcls(300, hidden=8)
    return main, startup, v["loss"], lambda: {
        "words": seqs(6, 300), "label": rng.integers(0, 2, (6, 1)).astype(np.int64)}


def word2vec():
    main, startup, _, v = build_word2vec(300, dim=8, negatives=3)
    return main, startup, v["loss"], lambda: {
        "center": rng.integers(0, 300, (8, 1)).astype(np.int64),
        "context": rng.integers(0, 300, (8, 4)).astype(np.int64)}


def seq2seq():
    main, startup, loss = build_train()

    def feed():
        src, dec_in, label, _ = make_batch(rng, 4)
        return {"src": src, "dec_in": dec_in, "label": label}
    return main, startup, loss, feed


# example -> (builder, ops that must compile)
EXAMPLES_ = {
    "digits mlp": (lambda: digits(mlp), {"mul", "mul_grad", "adam", "relu_grad", "top_k",
                                         "accuracy"}),
    "digits cnn": (lambda: digits(cnn), {"conv2d", "conv2d_grad", "batch_norm", "pool2d"}),
    "ctr_dnn sgd": (lambda: ctr("sgd"), {"fused_embedding_seq_pool_concat", "fc"}),
    "ctr_dnn adam": (lambda: ctr("adam"), {"adam"}),
    "ctr_dnn adagrad": (lambda: ctr("adagrad"), {"adagrad"}),
    "sentiment lstm": (sentiment, {"lstm", "lstm_grad", "sequence_pool_grad", "adam"}),
    "textcls": (textcls, {"fused_embedding_seq_pool", "cross_entropy2"}),
    "word2vec": (word2vec, {"lookup_table", "sigmoid_cross_entropy_with_logits", "one_hot",
                            "fill_zeros_like"}),
    "seq2seq": (seq2seq, set()),
}


# parameters whose gradient is zero up to rounding, which Adam turns into +-lr steps of
# either sign: a conv bias right before batch_norm (the normalization removes it)
UNDETERMINED = {"digits cnn": {"conv2d_0.b_0", "batch_norm_0.w_1"}}   # and its running mean


def _same_start(startup, scope, init):
    """Both runs start from the first run's initial values (a startup program without a
    random seed draws others each run)."""
    names = [v.name for v in startup.global_block().vars.values() if v.persistable]
    if init is None:
        return {n: np.array(scope.find_var(n).value._array) for n in names
                if scope.find_var(n) is not None and scope.find_var(n).value is not None}
    for n, a in init.items():
        scope.find_var(n).value._array[...] = a
    return init


def _params(main, scope):
    out = {}
    for v in main.global_block().all_parameters():
        t = scope.find_var(v.name)
        if t is not None and t.value is not None:
            out[v.name] = np.array(t.value._array if hasattr(t.value, "_array") else t.value)
    return out


@pytest.mark.parametrize("name", sorted(EXAMPLES_))
def test_an_examples_training_program_trains_compiled_as_interpreted(name):
    make, must_compile = EXAMPLES_[name]
    main, startup, loss, feed = make()
    feeds = [feed() for _ in range(3)]
    exe = fluid.Executor(fluid.CPUPlace())
    compiled = fluid.CompiledProgram(main).with_native_code(fetch_list=[loss])
    losses, params, init = {}, {}, None
    for kind, prog in (("interpreted", main), ("compiled", compiled)):
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        init = _same_start(startup, scope, init)
        reset_random_states(main, scope)     # dropout with seed 0 draws the same masks
        losses[kind] = [float(np.asarray(exe.run(prog, feed=f, fetch_list=[loss],
                                                  scope=scope)[0]).ravel()[0])
                        for f in feeds]
        params[kind] = _params(main, scope)
    np.testing.assert_allclose(losses["compiled"], losses["interpreted"], rtol=2e-4,
                               atol=1e-6)
    for n, want in params["interpreted"].items():
        if n in UNDETERMINED.get(name, ()):
            continue
        np.testing.assert_allclose(params["compiled"][n], want, rtol=2e-4, atol=1e-5,
                                   err_msg=n)
    from fluidity.codegen.explain import explain_rows
    rows = explain_rows(main, 0, keep=[loss.name])
    native = {t for _, t, where, _ in rows if where != "python"}
    assert must_compile <= native, f"{name}: {sorted(must_compile - native)} did not compile"
    python = sorted({t for _, t, where, _ in rows if where == "python"})
    print(f"{name}: {len(rows) - sum(1 for r in rows if r[2] == 'python')} of {len(rows)} "
          f"ops native; python: {python}")

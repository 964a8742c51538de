"""Book chapters whose training programs compile whole now that their Fluid 1.x ops have C
emitters: label_semantic_roles (linear_chain_crf, crf_decoding, chunk_eval),
understand_sentiment's convolution_net (sequence_conv) and recommender_system (cos_sim,
sequence_conv). Each is built by the chapter's own functions, lowered into one native segment
with no Python step, and trains compiled as it trains interpreted: a few SGD/Adagrad steps
from the same initial parameters give the same losses and parameters (float32 tolerance)."""
import os
import sys

import numpy as np
import pytest
from paths import TESTS

import fluidity as fluid
import fluidity.reader
from fluidity.codegen.explain import explain_rows

sys.path.insert(0, os.path.join(TESTS, "fluid_book"))
import test_label_semantic_roles as srl  # noqa: E402
import test_recommender_system as recommender  # noqa: E402
import test_understand_sentiment as sentiment  # noqa: E402


def label_semantic_roles():
    names = ["word_data", "ctx_n2_data", "ctx_n1_data", "ctx_0_data", "ctx_p1_data",
             "ctx_p2_data", "verb_data", "mark_data", "target"]
    feats = {n: fluid.layers.data(name=n, shape=[1], dtype="int64", lod_level=1) for n in names}
    feature_out = srl.db_lstm(word=feats["word_data"], predicate=feats["verb_data"],
                              ctx_n2=feats["ctx_n2_data"], ctx_n1=feats["ctx_n1_data"],
                              ctx_0=feats["ctx_0_data"], ctx_p1=feats["ctx_p1_data"],
                              ctx_p2=feats["ctx_p2_data"], mark=feats["mark_data"])
    crf_cost = fluid.layers.linear_chain_crf(input=feature_out, label=feats["target"],
                                             param_attr=fluid.ParamAttr(name="crfw"))
    avg_cost = fluid.layers.mean(crf_cost)
    fluid.optimizer.SGD(learning_rate=0.3).minimize(avg_cost)
    decode = fluid.layers.crf_decoding(input=feature_out, param_attr=fluid.ParamAttr(name="crfw"))
    f1 = fluid.layers.chunk_eval(input=decode, label=feats["target"], chunk_scheme="IOB",
                                 num_chunk_types=2)[2]
    return [feats[n] for n in names], [avg_cost, f1], srl.conll05(30, 1), 10


def convolution_net():
    data = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    cost, acc, _ = sentiment.convolution_net(data, label, input_dim=sentiment.DICT_DIM)
    fluid.optimizer.Adagrad(learning_rate=0.05).minimize(cost)
    return [data, label], [cost, acc], sentiment.imdb(48, 1), 16


def recommender_system():
    _, avg_cost = recommender.model()
    fluid.optimizer.SGD(learning_rate=0.2).minimize(avg_cost)
    block = fluid.default_main_program().global_block()
    names = ["user_id", "gender_id", "age_id", "job_id", "movie_id", "category_id",
             "movie_title", "score"]
    return [block.var(n) for n in names], [avg_cost], recommender.movielens(96, 1), 32


CHAPTERS = {"label_semantic_roles": label_semantic_roles, "convolution_net": convolution_net,
            "recommender_system": recommender_system}


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_a_book_chapter_compiles_whole_and_trains_as_interpreted(chapter):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 90
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        feeds, fetch, reader, batch = CHAPTERS[chapter]()
    rows = explain_rows(main, 0, keep=[v.name for v in fetch])
    python = sorted({t for _, t, w, _ in rows if w == "python"})
    segments = {w for _, _, w, _ in rows if w != "python"}
    assert python == [] and len(segments) == 1, (python, segments)

    feeder = fluid.DataFeeder(feed_list=feeds, place=fluid.CPUPlace())
    batches = [feeder.feed(b) for b in fluidity.batch(reader, batch_size=batch)()][:3]
    exe = fluid.Executor(fluid.CPUPlace())
    got, init = {}, None
    for kind in ("interpreted", "compiled"):
        prog = main if kind == "interpreted" else \
            fluid.CompiledProgram(main).with_native_code(fetch_list=fetch)
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        persist = [v.name for v in startup.global_block().vars.values() if v.persistable]
        if init is None:
            init = {n: np.array(scope.find_var(n).get_tensor()) for n in persist}
        for n, a in init.items():
            scope.find_var(n).get_tensor().set(a.copy(), fluid.CPUPlace())
        outs = [[float(np.asarray(o).reshape(-1)[0]) for o in
                 exe.run(prog, feed=f, fetch_list=fetch, scope=scope)] for f in batches]
        got[kind] = outs, {n: np.array(scope.find_var(n).get_tensor()) for n in persist}
    np.testing.assert_allclose(got["compiled"][0], got["interpreted"][0], rtol=2e-4, atol=1e-6)
    # Adagrad divides each update by the root of the gradient's own square sum, so where a
    # gradient nearly cancels, its rounding (the compiled sums' order vs numpy's) reaches the
    # parameter at up to lr x its relative error: 1e-4 absolute over three steps
    for n, want in got["interpreted"][1].items():
        np.testing.assert_allclose(got["compiled"][1][n], want, rtol=2e-4, atol=1e-4, err_msg=n)

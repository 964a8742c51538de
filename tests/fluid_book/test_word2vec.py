"""Book chapter 04.word2vec, as in Fluid 1.8's python/paddle/fluid/tests/book/
test_word2vec.py: an N-gram model (N = 5) whose four context words share one embedding
('shared_w', dense or is_sparse), concat, fc sigmoid, fc softmax over the dictionary,
cross_entropy, SGD; a DataFeeder over five int64 slots; training stops once the cost falls
below a threshold, then save_inference_model / load_inference_model and infer on LoDTensor
words. Synthetic 5-grams (the next word is a fixed function of the context) of a 40-word
dictionary replace paddle.dataset.imikolov; the learning rate is raised for the short run."""
import numpy as np
import pytest

import fluidity as fluid
from book_util import scalar

EMBED_SIZE = 32
HIDDEN_SIZE = 64
N = 5
BATCH_SIZE = 32
DICT_SIZE = 40


def next_word(ws):
    return (ws[2] + 1) % DICT_SIZE


def imikolov_train(n=640):
    def reader():
        r = np.random.default_rng(4)
        for _ in range(n):
            ws = [int(v) for v in r.integers(0, DICT_SIZE, 4)]
            yield tuple(ws) + (next_word(ws),)
    return reader


@pytest.mark.parametrize("is_sparse", [False, True])
def test_word2vec(is_sparse, tmp_path):
    def __network__(words):
        embeds = [fluid.layers.embedding(input=w, size=[DICT_SIZE, EMBED_SIZE],
                                         dtype='float32', is_sparse=is_sparse,
                                         param_attr='shared_w') for w in words[:4]]
        concat_embed = fluid.layers.concat(input=embeds, axis=1)
        hidden1 = fluid.layers.fc(input=concat_embed, size=HIDDEN_SIZE, act='sigmoid')
        predict_word = fluid.layers.fc(input=hidden1, size=DICT_SIZE, act='softmax')
        cost = fluid.layers.cross_entropy(input=predict_word, label=words[4])
        avg_cost = fluid.layers.mean(cost)
        return avg_cost, predict_word

    first_word = fluid.layers.data(name='firstw', shape=[1], dtype='int64')
    second_word = fluid.layers.data(name='secondw', shape=[1], dtype='int64')
    third_word = fluid.layers.data(name='thirdw', shape=[1], dtype='int64')
    forth_word = fluid.layers.data(name='forthw', shape=[1], dtype='int64')
    next_w = fluid.layers.data(name='nextw', shape=[1], dtype='int64')
    avg_cost, predict_word = __network__(
        [first_word, second_word, third_word, forth_word, next_w])
    sgd_optimizer = fluid.optimizer.SGD(learning_rate=1.0)
    sgd_optimizer.minimize(avg_cost)

    train_reader = fluid.batch(imikolov_train(), BATCH_SIZE)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    feeder = fluid.DataFeeder(
        feed_list=[first_word, second_word, third_word, forth_word, next_w], place=place)
    exe.run(fluid.default_startup_program())
    types = [op.type for op in fluid.default_main_program().global_block().ops]
    assert types.count("lookup_table") == 4

    save_dirname = str(tmp_path / "word2vec.inference.model")
    costs, converged = [], False
    for pass_id in range(30):
        for data in train_reader():
            avg_cost_np = exe.run(fluid.default_main_program(), feed=feeder.feed(data),
                                  fetch_list=[avg_cost])
            costs.append(scalar(avg_cost_np[0]))
            if costs[-1] < 0.5:
                fluid.io.save_inference_model(save_dirname,
                                              ['firstw', 'secondw', 'thirdw', 'forthw'],
                                              [predict_word], exe)
                converged = True
                break
        if converged:
            break
    assert converged, f"cost did not fall below 0.5: {costs[::20]}"

    with fluid.scope_guard(fluid.core.Scope()):
        [inferencer, feed_target_names, fetch_targets] = \
            fluid.io.load_inference_model(save_dirname, exe)
        ctx = np.random.default_rng(9).integers(0, DICT_SIZE, (8, 4)).astype(np.int64)
        words = [fluid.create_lod_tensor(ctx[:, i:i + 1], [[1] * 8], place)
                 for i in range(4)]
        results = exe.run(inferencer, feed=dict(zip(feed_target_names, words)),
                          fetch_list=fetch_targets, return_numpy=False)
    probs = np.array(results[0])
    assert probs.shape == (8, DICT_SIZE)
    assert np.mean(probs.argmax(1) == [next_word(c) for c in ctx]) > 0.8

"""Book chapter 01.fit_a_line, as in Fluid 1.8's python/paddle/fluid/tests/book/
test_fit_a_line.py: linear regression on 13 housing features, SGD, DataFeeder over a
shuffled, batched reader, then save_inference_model / load_inference_model and infer.
Synthetic data of UCI housing's shapes (13 normalized features, one price) with a linear
signal replace paddle.dataset.uci_housing."""
import numpy as np

import fluidity as fluid
import fluidity.reader
from book_util import scalar

rng = np.random.default_rng(1)
TRUE_W = rng.normal(size=13).astype(np.float32)


def uci_housing_train():
    def reader():
        r = np.random.default_rng(2)
        for _ in range(400):
            x = r.uniform(-1, 1, 13).astype(np.float32)
            yield x, np.array([x @ TRUE_W + 0.5], np.float32)
    return reader


def test_fit_a_line(tmp_path):
    x = fluid.layers.data(name='x', shape=[13], dtype='float32')
    y_predict = fluid.layers.fc(input=x, size=1, act=None)
    y = fluid.layers.data(name='y', shape=[1], dtype='float32')
    cost = fluid.layers.square_error_cost(input=y_predict, label=y)
    avg_cost = fluid.layers.mean(cost)
    sgd_optimizer = fluid.optimizer.SGD(learning_rate=0.05)
    sgd_optimizer.minimize(avg_cost)

    train_reader = fluidity.batch(
        fluidity.reader.shuffle(uci_housing_train(), buf_size=500), batch_size=20)
    place = fluid.CPUPlace()
    feeder = fluid.DataFeeder(place=place, feed_list=[x, y])
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())

    losses = []
    for pass_id in range(8):
        for data in train_reader():
            avg_loss_value, = exe.run(fluid.default_main_program(),
                                      feed=feeder.feed(data), fetch_list=[avg_cost])
            losses.append(scalar(avg_loss_value))
    assert losses[-1] < 0.05 < losses[0]

    save_dirname = str(tmp_path / "fit_a_line.inference.model")
    fluid.io.save_inference_model(save_dirname, ['x'], [y_predict], exe)

    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inference_program, feed_target_names, fetch_targets] = \
            fluid.io.load_inference_model(save_dirname, exe)
        batch = [s for s, _ in zip(uci_housing_train()(), range(10))]
        tensor_x = np.array([s[0] for s in batch]).astype("float32")
        results = exe.run(inference_program, feed={feed_target_names[0]: tensor_x},
                          fetch_list=fetch_targets)
    want = np.array([s[1] for s in batch])
    np.testing.assert_allclose(np.asarray(results[0]), want, atol=0.3)

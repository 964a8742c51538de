"""Book chapter 02.recognize_digits, as in Fluid 1.8's python/paddle/fluid/tests/book/
test_recognize_digits.py: the MLP (two fc 200 relu + softmax) and the conv net
(nets.simple_img_conv_pool x 2 with batch_norm), cross_entropy + accuracy, Adam, a DataFeeder
over paddle.batch(shuffle(reader)), test-program clone, then save/load_inference_model and
infer. Synthetic 28x28 images (one noisy template per digit) replace paddle.dataset.mnist;
the networks are the chapter's, with fewer passes over fewer samples."""
import numpy as np
import pytest

import fluidity as fluid
import fluidity.reader
from book_util import train_test

BATCH_SIZE = 32
TEMPLATES = np.random.default_rng(7).uniform(-1, 1, (10, 784)).astype(np.float32)


def mnist(n, seed):
    def reader():
        r = np.random.default_rng(seed)
        for _ in range(n):
            label = int(r.integers(0, 10))
            img = TEMPLATES[label] + r.normal(0, 0.5, 784).astype(np.float32)
            yield img, label
    return reader


def mlp(img, label):
    hidden = fluid.layers.fc(input=img, size=200, act='relu')
    hidden = fluid.layers.fc(input=hidden, size=200, act='relu')
    prediction = fluid.layers.fc(input=hidden, size=10, act='softmax')
    return loss_net(prediction, label)


def conv_net(img, label):
    conv_pool_1 = fluid.nets.simple_img_conv_pool(
        input=img, filter_size=5, num_filters=20, pool_size=2, pool_stride=2, act="relu")
    conv_pool_1 = fluid.layers.batch_norm(conv_pool_1)
    conv_pool_2 = fluid.nets.simple_img_conv_pool(
        input=conv_pool_1, filter_size=5, num_filters=50, pool_size=2, pool_stride=2,
        act="relu")
    prediction = fluid.layers.fc(input=conv_pool_2, size=10, act='softmax')
    return loss_net(prediction, label)


def loss_net(prediction, label):
    loss = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_loss = fluid.layers.mean(loss)
    acc = fluid.layers.accuracy(input=prediction, label=label)
    return prediction, avg_loss, acc


@pytest.mark.parametrize("nn_type,passes", [("mlp", 2), ("conv", 5)])
def test_recognize_digits(nn_type, passes, tmp_path):
    img = fluid.layers.data(name='img', shape=[1, 28, 28], dtype='float32')
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    net_conf = mlp if nn_type == "mlp" else conv_net
    prediction, avg_loss, acc = net_conf(img, label)
    test_program = fluid.default_main_program().clone(for_test=True)
    optimizer = fluid.optimizer.Adam(learning_rate=0.001)
    optimizer.minimize(avg_loss)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    train_reader = fluidity.batch(fluidity.reader.shuffle(mnist(320, 1), buf_size=500),
                                  batch_size=BATCH_SIZE)
    test_reader = fluidity.batch(mnist(96, 2), batch_size=BATCH_SIZE)
    feeder = fluid.DataFeeder(feed_list=[img, label], place=place)
    exe.run(fluid.default_startup_program())

    for pass_id in range(passes):
        for data in train_reader():
            exe.run(fluid.default_main_program(), feed=feeder.feed(data),
                    fetch_list=[avg_loss, acc])
    test_loss, test_acc = train_test(exe, test_program, feeder, test_reader, [avg_loss, acc])
    assert test_acc > 0.9 and test_loss < 0.5, (nn_type, test_acc, test_loss)

    save_dirname = str(tmp_path / f"recognize_digits_{nn_type}.inference.model")
    fluid.io.save_inference_model(save_dirname, ["img"], [prediction], exe)
    with fluid.scope_guard(fluid.core.Scope()):
        [inference_program, feed_target_names, fetch_targets] = \
            fluid.io.load_inference_model(save_dirname, exe)
        samples = list(mnist(16, 3)())
        tensor_img = np.array([s[0] for s in samples]).reshape(16, 1, 28, 28)
        results = exe.run(inference_program, feed={feed_target_names[0]: tensor_img},
                          fetch_list=fetch_targets)
    pred = np.asarray(results[0]).argmax(1)
    assert np.mean(pred == np.array([s[1] for s in samples])) > 0.9

"""Book chapter 06.understand_sentiment, as in Fluid 1.8's python/paddle/fluid/tests/book/
test_understand_sentiment.py: convolution_net (two nets.sequence_conv_pool, sqrt pooling),
stacked_lstm_net (fc + dynamic_lstm stacks alternating is_reverse, sequence_pool max) and
dyn_rnn_lstm (an LSTM cell written with DynamicRNN), softmax + cross_entropy + accuracy,
Adagrad, a DataFeeder over paddle.batch(shuffle(reader)) of variable-length word-id
sequences; training stops once cost < 0.4 and accuracy > 0.8, then save/load the inference
model and classify LoDTensor sentences. Synthetic reviews (positive ones draw mostly from
the first half of a 60-word dictionary) replace paddle.dataset.imdb; dims are cut (hid_dim
512 -> 32, lstm_size 128 -> 16) and the learning rate raised for the short run."""
import numpy as np
import pytest

import fluidity as fluid
import fluidity.reader
from book_util import scalar

DICT_DIM = 60
BATCH_SIZE = 16


def imdb(n, seed):
    def reader():
        r = np.random.default_rng(seed)
        for _ in range(n):
            label = int(r.integers(0, 2))
            length = int(r.integers(3, 9))
            own = r.integers(0, DICT_DIM // 2, length) + (0 if label else DICT_DIM // 2)
            noise = r.integers(0, DICT_DIM, length)
            words = np.where(r.uniform(size=length) < 0.8, own, noise)
            yield words.tolist(), label
    return reader


def convolution_net(data, label, input_dim, class_dim=2, emb_dim=32, hid_dim=32):
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    conv_3 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=3,
                                           act="tanh", pool_type="sqrt")
    conv_4 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=4,
                                           act="tanh", pool_type="sqrt")
    prediction = fluid.layers.fc(input=[conv_3, conv_4], size=class_dim, act="softmax")
    return loss_net(prediction, label)


def dyn_rnn_lstm(data, label, input_dim, class_dim=2, emb_dim=32, lstm_size=16):
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    sentence = fluid.layers.fc(input=emb, size=lstm_size, act='tanh')

    rnn = fluid.layers.DynamicRNN()
    with rnn.block():
        word = rnn.step_input(sentence)
        prev_hidden = rnn.memory(value=0.0, shape=[lstm_size])
        prev_cell = rnn.memory(value=0.0, shape=[lstm_size])

        def gate_common(ipt, hidden, size):
            gate0 = fluid.layers.fc(input=ipt, size=size, bias_attr=True)
            gate1 = fluid.layers.fc(input=hidden, size=size, bias_attr=False)
            return gate0 + gate1

        forget_gate = fluid.layers.sigmoid(x=gate_common(word, prev_hidden, lstm_size))
        input_gate = fluid.layers.sigmoid(x=gate_common(word, prev_hidden, lstm_size))
        output_gate = fluid.layers.sigmoid(x=gate_common(word, prev_hidden, lstm_size))
        cell_gate = fluid.layers.tanh(x=gate_common(word, prev_hidden, lstm_size))

        cell = forget_gate * prev_cell + input_gate * cell_gate
        hidden = output_gate * fluid.layers.tanh(x=cell)
        rnn.update_memory(prev_cell, cell)
        rnn.update_memory(prev_hidden, hidden)
        rnn.output(hidden)

    last = fluid.layers.sequence_last_step(rnn())
    prediction = fluid.layers.fc(input=last, size=class_dim, act="softmax")
    return loss_net(prediction, label)


def stacked_lstm_net(data, label, input_dim, class_dim=2, emb_dim=32, hid_dim=32,
                     stacked_num=3):
    assert stacked_num % 2 == 1
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    fc1 = fluid.layers.fc(input=emb, size=hid_dim)
    lstm1, cell1 = fluid.layers.dynamic_lstm(input=fc1, size=hid_dim)
    inputs = [fc1, lstm1]
    for i in range(2, stacked_num + 1):
        fc = fluid.layers.fc(input=inputs, size=hid_dim)
        lstm, cell = fluid.layers.dynamic_lstm(input=fc, size=hid_dim,
                                               is_reverse=((i % 2) == 0))
        inputs = [fc, lstm]
    fc_last = fluid.layers.sequence_pool(input=inputs[0], pool_type='max')
    lstm_last = fluid.layers.sequence_pool(input=inputs[1], pool_type='max')
    prediction = fluid.layers.fc(input=[fc_last, lstm_last], size=class_dim, act='softmax')
    return loss_net(prediction, label)


def loss_net(prediction, label):
    cost = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_cost = fluid.layers.mean(cost)
    accuracy = fluid.layers.accuracy(input=prediction, label=label)
    return avg_cost, accuracy, prediction


@pytest.mark.parametrize("net_method,lr,save", [
    (convolution_net, 0.05, True), (stacked_lstm_net, 0.05, True), (dyn_rnn_lstm, 0.1, False),
    (dyn_rnn_lstm, 0.1, True)])
def test_understand_sentiment(net_method, lr, save, tmp_path):
    data = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    cost, acc_out, prediction = net_method(data, label, input_dim=DICT_DIM)
    adagrad = fluid.optimizer.Adagrad(learning_rate=lr)
    adagrad.minimize(cost)

    train_data = fluidity.batch(fluidity.reader.shuffle(imdb(320, 1), buf_size=1000),
                                batch_size=BATCH_SIZE)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    feeder = fluid.DataFeeder(feed_list=[data, label], place=place)
    exe.run(fluid.default_startup_program())

    save_dirname = str(tmp_path / "understand_sentiment.inference.model")
    history, done = [], False
    for pass_id in range(6):
        for batch in train_data():
            cost_val, acc_val = exe.run(fluid.default_main_program(),
                                        feed=feeder.feed(batch), fetch_list=[cost, acc_out])
            cost_val = scalar(cost_val)
            acc_val = scalar(acc_val)
            history.append((round(cost_val, 3), acc_val))
            recent = history[-3:]       # three batches in a row, not one lucky batch
            if len(recent) == 3 and max(c for c, _ in recent) < 0.4 and \
                    min(a for _, a in recent) > 0.8:
                if save:
                    fluid.io.save_inference_model(save_dirname, ["words"], prediction, exe)
                done = True
                break
        if done:
            break
    assert done, f"{net_method.__name__} did not converge: {history[::5]}"
    if not save:
        return

    with fluid.scope_guard(fluid.core.Scope()):
        [inferencer, feed_target_names, fetch_targets] = \
            fluid.io.load_inference_model(save_dirname, exe)
        samples = list(imdb(48, 7)())
        lens = [len(w) for w, _ in samples]
        flat = np.array([t for w, _ in samples for t in w], np.int64).reshape(-1, 1)
        tensor_words = fluid.create_lod_tensor(flat, [lens], place)
        results = exe.run(inferencer, feed={feed_target_names[0]: tensor_words},
                          fetch_list=fetch_targets, return_numpy=False)
    probs = np.array(results[0])
    assert probs.shape == (48, 2)
    assert np.mean(probs.argmax(1) == [lab for _, lab in samples]) > 0.7

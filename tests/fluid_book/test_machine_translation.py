"""Book chapter 08.machine_translation, as in Fluid 1.8's python/paddle/fluid/tests/book/
test_machine_translation.py: an encoder (embedding, fc tanh, dynamic_lstm,
sequence_last_step) and a DynamicRNN decoder trained with cross_entropy and Adagrad (L2
decay) over a DataFeeder of three sequence slots; then beam-search decoding in a While loop:
tensor arrays of states, ids and scores, sequence_expand of the state to the prefixes,
lod_reset, topk, accumulated log scores, beam_search (end_id 10), beam_search_decode.
Synthetic pairs replace paddle.dataset.wmt14: the target counts up from 1 (<s> = 0, then
1, 2, ..., L) and ends with </s> = 10. `test_decode_as_the_chapter` is the chapter's
decode_main verbatim (fresh parameters, as in Fluid's test); `test_train_then_beam_search`
trains, shares the trained parameters by name with the decoder (fill_constant for the
counter and a shape check for "no candidates left" where the chapter uses zeros/is_empty)
and checks the decoded sentences."""
import numpy as np
import pytest

import fluidity as fluid
import fluidity.reader
from book_util import scalar

pd = fluid.layers
dict_size = 12
hidden_dim = 32
word_dim = 16
batch_size = 8
max_length = 8
beam_size = 2
decoder_size = hidden_dim
START, END = 0, 10


def wmt14(n, seed):
    def reader():
        r = np.random.default_rng(seed)
        for _ in range(n):
            src = r.integers(1, 10, int(r.integers(2, 6))).tolist()
            seq = list(range(1, int(r.integers(2, 6)) + 1))
            yield src, [START] + seq, seq + [END]
    return reader


def encoder(is_sparse):
    src_word_id = pd.data(name="src_word_id", shape=[1], dtype='int64', lod_level=1)
    src_embedding = pd.embedding(input=src_word_id, size=[dict_size, word_dim],
                                 dtype='float32', is_sparse=is_sparse,
                                 param_attr=fluid.ParamAttr(name='vemb'))
    fc1 = pd.fc(input=src_embedding, size=hidden_dim * 4, act='tanh')
    lstm_hidden0, lstm_0 = pd.dynamic_lstm(input=fc1, size=hidden_dim * 4)
    encoder_out = pd.sequence_last_step(input=lstm_hidden0)
    return encoder_out


def decoder_train(context, is_sparse):
    trg_language_word = pd.data(name="target_language_word", shape=[1], dtype='int64',
                                lod_level=1)
    trg_embedding = pd.embedding(input=trg_language_word, size=[dict_size, word_dim],
                                 dtype='float32', is_sparse=is_sparse,
                                 param_attr=fluid.ParamAttr(name='vemb'))
    rnn = pd.DynamicRNN()
    with rnn.block():
        current_word = rnn.step_input(trg_embedding)
        pre_state = rnn.memory(init=context, need_reorder=True)
        current_state = pd.fc(input=[current_word, pre_state], size=decoder_size, act='tanh',
                              param_attr=['dec_w_word', 'dec_w_state'], bias_attr='dec_b')
        current_score = pd.fc(input=current_state, size=dict_size, act='softmax',
                              param_attr='out_w', bias_attr='out_b')
        rnn.update_memory(pre_state, current_state)
        rnn.output(current_score)
    return rnn()


def decoder_decode(context, is_sparse, counter=None, finished=None, shared=False):
    """The chapter's decoder; `counter` and `finished` replace pd.zeros and pd.is_empty
    when given, `shared` names the parameters as decoder_train does."""
    init_state = context
    array_len = pd.fill_constant(shape=[1], dtype='int64', value=max_length)
    if counter is None:
        counter = pd.zeros(shape=[1], dtype='int64', force_cpu=True)
    else:
        counter = counter()
    # fill the first element with init_state
    state_array = pd.create_array('float32')
    pd.array_write(init_state, array=state_array, i=counter)
    # ids, scores as memory
    ids_array = pd.create_array('int64')
    scores_array = pd.create_array('float32')
    init_ids = pd.data(name="init_ids", shape=[1], dtype="int64", lod_level=2)
    init_scores = pd.data(name="init_scores", shape=[1], dtype="float32", lod_level=2)
    pd.array_write(init_ids, array=ids_array, i=counter)
    pd.array_write(init_scores, array=scores_array, i=counter)

    cond = pd.less_than(x=counter, y=array_len)
    while_op = pd.While(cond=cond)
    with while_op.block():
        pre_ids = pd.array_read(array=ids_array, i=counter)
        pre_state = pd.array_read(array=state_array, i=counter)
        pre_score = pd.array_read(array=scores_array, i=counter)
        # expand the lod of pre_state to be the same with pre_score
        pre_state_expanded = pd.sequence_expand(pre_state, pre_score)
        pre_ids_emb = pd.embedding(input=pre_ids, size=[dict_size, word_dim], dtype='float32',
                                   is_sparse=is_sparse,
                                   param_attr='vemb' if shared else None)
        # use rnn unit to update rnn
        current_state = pd.fc(input=[pre_state_expanded, pre_ids_emb], size=decoder_size,
                              act='tanh',
                              param_attr=['dec_w_state', 'dec_w_word'] if shared else None,
                              bias_attr='dec_b' if shared else None)
        current_state_with_lod = pd.lod_reset(x=current_state, y=pre_score)
        # use score to do beam search
        current_score = pd.fc(input=current_state_with_lod, size=dict_size, act='softmax',
                              param_attr='out_w' if shared else None,
                              bias_attr='out_b' if shared else None)
        topk_scores, topk_indices = pd.topk(current_score, k=beam_size)
        # calculate accumulated scores after topk to reduce computation cost
        accu_scores = pd.elementwise_add(x=pd.log(topk_scores),
                                         y=pd.reshape(pre_score, shape=[-1]), axis=0)
        selected_ids, selected_scores = pd.beam_search(pre_ids, pre_score, topk_indices,
                                                       accu_scores, beam_size, end_id=END,
                                                       level=0)
        pd.increment(x=counter, value=1, in_place=True)
        # update the memories
        pd.array_write(current_state, array=state_array, i=counter)
        pd.array_write(selected_ids, array=ids_array, i=counter)
        pd.array_write(selected_scores, array=scores_array, i=counter)
        # update the break condition: up to the max length or all candidates of
        # source sentences have ended.
        length_cond = pd.less_than(x=counter, y=array_len)
        if finished is None:
            finish_cond = pd.logical_not(pd.is_empty(x=selected_ids))
        else:
            finish_cond = finished(selected_ids)
        pd.logical_and(x=length_cond, y=finish_cond, out=cond)

    translation_ids, translation_scores = pd.beam_search_decode(
        ids=ids_array, scores=scores_array, beam_size=beam_size, end_id=END)
    return translation_ids, translation_scores


def init_beams(n, place):
    lens = [[1] * n, [1] * n]
    init_ids = fluid.create_lod_tensor(np.full((n, 1), START, np.int64), lens, place)
    init_scores = fluid.create_lod_tensor(np.ones((n, 1), np.float32), lens, place)
    return init_ids, init_scores


def train_program(is_sparse):
    context = encoder(is_sparse)
    rnn_out = decoder_train(context, is_sparse)
    label = pd.data(name="target_language_next_word", shape=[1], dtype='int64', lod_level=1)
    cost = pd.cross_entropy(input=rnn_out, label=label)
    avg_cost = pd.mean(cost)
    optimizer = fluid.optimizer.Adagrad(
        learning_rate=0.2,
        regularization=fluid.regularizer.L2DecayRegularizer(regularization_coeff=1e-4))
    optimizer.minimize(avg_cost)
    return avg_cost


@pytest.mark.parametrize("is_sparse", [True, False])
def test_train_then_beam_search(is_sparse):
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    avg_cost = train_program(is_sparse)
    main_program = fluid.default_main_program()
    exe.run(fluid.default_startup_program())
    train_data = fluidity.batch(fluidity.reader.shuffle(wmt14(400, 1), buf_size=1000),
                                batch_size=batch_size)
    feed_order = ['src_word_id', 'target_language_word', 'target_language_next_word']
    feed_list = [main_program.global_block().var(var_name) for var_name in feed_order]
    feeder = fluid.DataFeeder(feed_list, place)
    costs = []
    for pass_id in range(2):
        for data in train_data():
            outs = exe.run(main_program, feed=feeder.feed(data), fetch_list=[avg_cost])
            costs.append(scalar(outs[0]))
    assert np.mean(costs[-10:]) < 0.5 * np.mean(costs[:5]), costs[::10]
    assert np.mean(costs[-10:]) < 0.6

    decode, decode_startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(decode, decode_startup), fluid.unique_name.guard():
        context = encoder(is_sparse)

        def finished(selected_ids):      # "selected_ids is not empty"
            rows = pd.slice(pd.shape(selected_ids), axes=[0], starts=[0], ends=[1])
            return pd.greater_than(rows, pd.fill_constant([1], 'int32', 0))
        translation_ids, translation_scores = decoder_decode(
            context, is_sparse, shared=True, finished=finished,
            counter=lambda: pd.fill_constant(shape=[1], dtype='int64', value=0))
    # the decoder reads the trained parameters: the encoder's by their generated names
    # (built in the same order), the decoder's by the names both programs give them
    trained = {p.name for p in main_program.global_block().all_parameters()}
    assert {p.name for p in decode.global_block().all_parameters()} <= trained

    src = [s for s, _, _ in wmt14(3, 7)()]
    feed = feeder.feed([(s, [0], [0]) for s in src])
    init_ids, init_scores = init_beams(len(src), place)
    result_ids, result_scores = exe.run(
        decode, feed={'src_word_id': feed['src_word_id'], 'init_ids': init_ids,
                      'init_scores': init_scores},
        fetch_list=[translation_ids, translation_scores], return_numpy=False)
    src_lod, sent_lod = result_ids.lod()
    assert len(src_lod) == len(src) + 1 and result_scores.lod() == result_ids.lod()
    ids, scores = np.array(result_ids), np.array(result_scores)
    for k in range(len(src)):
        n_sent = src_lod[k + 1] - src_lod[k]
        assert 1 <= n_sent <= beam_size
        first = sent_lod[src_lod[k]]
        best = ids[first:sent_lod[src_lod[k] + 1]].tolist()
        best_scores = scores[first:sent_lod[src_lod[k] + 1]]
        # <s>, then counting up from 1, ended by </s> or the length limit
        assert best[:3] == [START, 1, 2], best
        body = best[1:-1] if best[-1] == END else best[1:]
        assert body == list(range(1, len(body) + 1)), best
        assert (np.diff(best_scores) <= 1e-6).all()   # accumulated log-probabilities
        # sentences of a source come best (highest final score) first
        ends = [scores[sent_lod[j + 1] - 1] for j in range(src_lod[k], src_lod[k + 1])]
        assert ends == sorted(ends, reverse=True)


def test_decode_as_the_chapter():
    context = encoder(False)
    translation_ids, translation_scores = decoder_decode(context, False)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    init_ids, init_scores = init_beams(batch_size, place)
    feeder = fluid.DataFeeder([fluid.default_main_program().global_block().var('src_word_id')],
                              place)
    for data in fluidity.batch(wmt14(batch_size, 3), batch_size=batch_size)():
        feed_dict = feeder.feed([[x[0]] for x in data])
        feed_dict['init_ids'] = init_ids
        feed_dict['init_scores'] = init_scores
        result_ids, result_scores = exe.run(
            fluid.default_main_program(), feed=feed_dict,
            fetch_list=[translation_ids, translation_scores], return_numpy=False)
        lens = result_ids.recursive_sequence_lengths()
        assert len(lens) == 2 and len(lens[0]) == batch_size
        break

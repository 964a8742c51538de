"""Book chapter 05.recommender_system, as in Fluid 1.8's python/paddle/fluid/tests/book/
test_recommender_system.py: user features (id, gender, age, job embeddings -> fc -> concat ->
fc 200 tanh) and movie features (id embedding -> fc, category ids embedded and sum-pooled,
title ids through nets.sequence_conv_pool), cos_sim scaled by 5 against the rating with
square_error_cost, SGD, a DataFeeder over eight slots (two of them sequences); training stops
once the test cost falls below a threshold, then save/load the inference model and score
new pairs. Synthetic ratings (a user taste times a movie trait) replace
paddle.dataset.movielens."""
import numpy as np

import fluidity as fluid
import fluidity.reader
from book_util import train_test

layers, nets = fluid.layers, fluid.nets
IS_SPARSE = True
BATCH_SIZE = 32
N_USERS, N_MOVIES, N_JOBS, N_AGES, N_CATEGORIES, N_TITLE_WORDS = 30, 40, 8, 7, 6, 50
_r = np.random.default_rng(21)
USER_TASTE = _r.choice([-1.0, 1.0], N_USERS)
MOVIE_TRAIT = _r.choice([-1.0, 1.0], N_MOVIES)
MOVIE_CATEGORIES = [_r.integers(0, N_CATEGORIES, _r.integers(1, 4)).tolist()
                    for _ in range(N_MOVIES)]
MOVIE_TITLES = [_r.integers(0, N_TITLE_WORDS, _r.integers(2, 6)).tolist()
                for _ in range(N_MOVIES)]


def movielens(n, seed):
    def reader():
        r = np.random.default_rng(seed)
        for _ in range(n):
            u, m = int(r.integers(0, N_USERS)), int(r.integers(0, N_MOVIES))
            score = 3.0 + 2.0 * USER_TASTE[u] * MOVIE_TRAIT[m]
            yield [u, u % 2, u % N_AGES, u % N_JOBS, m, MOVIE_CATEGORIES[m], MOVIE_TITLES[m],
                   [score]]
    return reader


def get_usr_combined_features():
    uid = layers.data(name='user_id', shape=[1], dtype='int64')
    usr_emb = layers.embedding(input=uid, dtype='float32', size=[N_USERS, 32],
                               param_attr='user_table', is_sparse=IS_SPARSE)
    usr_fc = layers.fc(input=usr_emb, size=32)
    usr_gender_id = layers.data(name='gender_id', shape=[1], dtype='int64')
    usr_gender_emb = layers.embedding(input=usr_gender_id, size=[2, 16],
                                      param_attr='gender_table', is_sparse=IS_SPARSE)
    usr_gender_fc = layers.fc(input=usr_gender_emb, size=16)
    usr_age_id = layers.data(name='age_id', shape=[1], dtype="int64")
    usr_age_emb = layers.embedding(input=usr_age_id, size=[N_AGES, 16], is_sparse=IS_SPARSE,
                                   param_attr='age_table')
    usr_age_fc = layers.fc(input=usr_age_emb, size=16)
    usr_job_id = layers.data(name='job_id', shape=[1], dtype="int64")
    usr_job_emb = layers.embedding(input=usr_job_id, size=[N_JOBS, 16],
                                   param_attr='job_table', is_sparse=IS_SPARSE)
    usr_job_fc = layers.fc(input=usr_job_emb, size=16)
    concat_embed = layers.concat(input=[usr_fc, usr_gender_fc, usr_age_fc, usr_job_fc], axis=1)
    return layers.fc(input=concat_embed, size=200, act="tanh")


def get_mov_combined_features():
    mov_id = layers.data(name='movie_id', shape=[1], dtype='int64')
    mov_emb = layers.embedding(input=mov_id, dtype='float32', size=[N_MOVIES, 32],
                               param_attr='movie_table', is_sparse=IS_SPARSE)
    mov_fc = layers.fc(input=mov_emb, size=32)
    category_id = layers.data(name='category_id', shape=[1], dtype='int64', lod_level=1)
    mov_categories_emb = layers.embedding(input=category_id, size=[N_CATEGORIES, 32],
                                          is_sparse=IS_SPARSE)
    mov_categories_hidden = layers.sequence_pool(input=mov_categories_emb, pool_type="sum")
    mov_title_id = layers.data(name='movie_title', shape=[1], dtype='int64', lod_level=1)
    mov_title_emb = layers.embedding(input=mov_title_id, size=[N_TITLE_WORDS, 32],
                                     is_sparse=IS_SPARSE)
    mov_title_conv = nets.sequence_conv_pool(input=mov_title_emb, num_filters=32,
                                             filter_size=3, act="tanh", pool_type="sum")
    concat_embed = layers.concat(input=[mov_fc, mov_categories_hidden, mov_title_conv], axis=1)
    return layers.fc(input=concat_embed, size=200, act="tanh")


def model():
    usr_combined_features = get_usr_combined_features()
    mov_combined_features = get_mov_combined_features()
    inference = layers.cos_sim(X=usr_combined_features, Y=mov_combined_features)
    scale_infer = layers.scale(x=inference, scale=5.0)
    label = layers.data(name='score', shape=[1], dtype='float32')
    square_cost = layers.square_error_cost(input=scale_infer, label=label)
    avg_cost = layers.mean(square_cost)
    return scale_infer, avg_cost


def test_recommender_system(tmp_path):
    scale_infer, avg_cost = model()
    test_program = fluid.default_main_program().clone(for_test=True)
    sgd_optimizer = fluid.optimizer.SGD(learning_rate=0.2)
    sgd_optimizer.minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    train_reader = fluidity.batch(fluidity.reader.shuffle(movielens(640, 1), buf_size=8192),
                                  batch_size=BATCH_SIZE)
    test_reader = fluidity.batch(movielens(64, 2), batch_size=BATCH_SIZE)
    feed_order = ['user_id', 'gender_id', 'age_id', 'job_id', 'movie_id', 'category_id',
                  'movie_title', 'score']
    main_program = fluid.default_main_program()
    feed_list = [main_program.global_block().var(var_name) for var_name in feed_order]
    feeder = fluid.DataFeeder(feed_list, place)

    save_dirname = str(tmp_path / "recommender_system.inference.model")
    test_costs, done = [], False
    for pass_id in range(10):
        for batch_id, data in enumerate(train_reader()):
            exe.run(program=main_program, feed=feeder.feed(data), fetch_list=[avg_cost])
        test_costs.append(train_test(exe, test_program, feeder, test_reader, [avg_cost])[0])
        if test_costs[-1] < 1.0:
            fluid.io.save_inference_model(
                save_dirname, ["user_id", "gender_id", "age_id", "job_id", "movie_id",
                               "category_id", "movie_title"], [scale_infer], exe)
            done = True
            break
    assert done, f"test cost did not fall below 1.0: {test_costs}"

    with fluid.scope_guard(fluid.core.Scope()):
        [inference_program, feed_target_names, fetch_targets] = \
            fluid.io.load_inference_model(save_dirname, exe)
        samples = list(movielens(8, 5)())
        feeder = fluid.DataFeeder([inference_program.global_block().var(n)
                                   for n in feed_target_names], place, inference_program)
        results = exe.run(inference_program, feed=feeder.feed([s[:7] for s in samples]),
                          fetch_list=fetch_targets, return_numpy=False)
    pred = np.array(results[0]).ravel()
    want = np.array([s[7][0] for s in samples])
    assert np.mean(np.sign(pred - 3.0) == np.sign(want - 3.0)) > 0.7

"""fluid.DataFeeder: samples -> feed dict (dtype and shape from the variables, nested lists of
lod_level > 0 slots -> LoDTensors with recursive sequence lengths), errors naming the slot,
feed_parallel and decorate_reader."""
import numpy as np
import pytest

import fluidity as fluid


def _vars():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        img = fluid.layers.data(name="img", shape=[1, 2, 2], dtype="float32")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        para = fluid.layers.data(name="para", shape=[1], dtype="int64", lod_level=2)
    return main, img, label, words, para


def test_feed_dense_slots_reshaped_to_the_variable():
    main, img, label, _, _ = _vars()
    feeder = fluid.DataFeeder(feed_list=[img, label], place=fluid.CPUPlace(), program=main)
    out = feeder.feed([(np.arange(4), 3), ([4, 5, 6, 7], 1)])
    a = np.asarray(out["img"])
    assert a.shape == (2, 1, 2, 2) and a.dtype == np.float32
    np.testing.assert_array_equal(a.reshape(2, 4), [[0, 1, 2, 3], [4, 5, 6, 7]])
    lab = np.asarray(out["label"])
    assert lab.shape == (2, 1) and lab.dtype == np.int64
    np.testing.assert_array_equal(lab.ravel(), [3, 1])


def test_feed_lod_slots_by_name():
    main, _, _, words, para = _vars()
    feeder = fluid.DataFeeder(feed_list=["words", "para"], place=fluid.CPUPlace(),
                              program=main)
    out = feeder.feed([([1, 2, 3], [[1, 2], [3]]), ([4], [[5, 6, 7]])])
    w = out["words"]
    assert w.recursive_sequence_lengths() == [[3, 1]]
    np.testing.assert_array_equal(np.asarray(w).ravel(), [1, 2, 3, 4])
    assert np.asarray(w).shape == (4, 1)
    p = out["para"]
    assert p.recursive_sequence_lengths() == [[2, 1], [2, 1, 3]]
    np.testing.assert_array_equal(np.asarray(p).ravel(), [1, 2, 3, 5, 6, 7])


def test_feed_result_runs_in_a_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
        emb = fluid.layers.embedding(words, size=[10, 3])
        pooled = fluid.layers.sequence_pool(emb, "sum")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    feeder = fluid.DataFeeder([words], fluid.CPUPlace())
    feeder_main = fluid.DataFeeder([words], fluid.CPUPlace(), program=main)
    assert feeder.feed_names == feeder_main.feed_names
    out, = exe.run(main, feed=feeder_main.feed([([1, 2],), ([3, 4, 5],)]), fetch_list=[pooled])
    assert np.asarray(out).shape == (2, 3)


def test_errors_name_the_slot():
    main, img, label, words, _ = _vars()
    feeder = fluid.DataFeeder([img, label, words], fluid.CPUPlace(), program=main)
    with pytest.raises(ValueError, match="2 fields but the feed list has 3"):
        feeder.feed([(np.zeros(4), 1)])
    with pytest.raises(ValueError, match="'img'"):
        feeder.feed([(np.zeros(5), 1, [1])])
    with pytest.raises(ValueError, match="'words'.*lod_level 1"):
        feeder.feed([(np.zeros(4), 1, 7)])
    with pytest.raises(TypeError, match="feed_list"):
        fluid.DataFeeder(img, fluid.CPUPlace())
    with pytest.raises(TypeError, match="Variables or their names"):
        fluid.DataFeeder([3], fluid.CPUPlace())


def test_feed_parallel_and_decorate_reader():
    main, _, label, _, _ = _vars()
    feeder = fluid.DataFeeder([label], fluid.CPUPlace(), program=main)
    outs = list(feeder.feed_parallel([[(1,), (2,)], [(3,)]], num_places=2))
    assert [np.asarray(o["label"]).ravel().tolist() for o in outs] == [[1, 2], [3]]
    with pytest.raises(ValueError, match="one minibatch per place"):
        list(feeder.feed_parallel([[(1,)]], num_places=2))

    def reader():
        for i in range(5):
            yield [(i,), (i + 10,)]
    single = list(feeder.decorate_reader(reader, multi_devices=False)())
    assert len(single) == 5 and np.asarray(single[4]["label"]).ravel().tolist() == [4, 14]
    multi = list(feeder.decorate_reader(reader, multi_devices=True, num_places=2)())
    assert len(multi) == 2 and len(multi[0]) == 2
    with pytest.raises(ValueError, match="left over"):
        list(feeder.decorate_reader(reader, multi_devices=True, num_places=2,
                                    drop_last=False)())


def test_feeder_and_reader_sample_lists_convert_alike():
    """DataFeeder and py_reader / DataLoader sample lists share one converter."""
    from fluidity.reader import feeding
    main, img, label, words, para = _vars()
    samples = [(np.arange(4), 3, [1, 2], [[1], [2, 3]]), ([4, 5, 6, 7], 1, [4], [[5, 6, 7]])]
    feeder = fluid.DataFeeder([img, label, words, para], fluid.CPUPlace(), program=main)
    by_feeder = feeder.feed(samples)
    by_reader = feeding.samples_to_tensors(samples, feeding.slots_of([img, label, words, para]))
    for name, t in zip(feeder.feed_names, by_reader):
        np.testing.assert_array_equal(np.asarray(t), np.asarray(by_feeder[name]))
        assert t.recursive_sequence_lengths() == by_feeder[name].recursive_sequence_lengths()
    with pytest.raises(fluid.errors.FeedError, match="empty batch"):
        feeder.feed([])

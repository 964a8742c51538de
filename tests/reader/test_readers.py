"""Readers in programs and DataLoaders, run as a user runs them: training loops until
fluid.core.EOFException, reset, errors of the user's generator, threads that end."""
import threading

import numpy as np
import pytest

import fluidity as fluid
from fluidity.errors import FluidityError


def _threads():
    return {t for t in threading.enumerate() if t.name.startswith("fluidity-")}


@pytest.fixture(autouse=True)
def no_thread_left():
    before = _threads()
    yield
    assert _threads() - before == set()


def _scalar(v):
    return float(np.asarray(v).reshape(-1)[0])


def _batches(n=6, bs=4, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((bs, 3)).astype(np.float32),
             rng.integers(0, 2, (bs, 1)).astype(np.int64)) for _ in range(n)]


def _net(x, y):
    logits = fluid.layers.fc(x, 2)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
    fluid.optimizer.SGD(0.5).minimize(loss)
    return loss


def _feed_losses(batches, epochs=2):
    """The losses of the same training fed batch by batch (the reference)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        y = fluid.layers.data("y", [1], dtype="int64")
        loss = _net(x, y)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return [_scalar(exe.run(main, feed={"x": a, "y": b}, fetch_list=[loss], scope=scope)[0])
            for _ in range(epochs) for a, b in batches]


def _run_to_eof(exe, main, loss, scope=None):
    out = []
    try:
        while True:
            out.append(_scalar(exe.run(main, fetch_list=[loss], scope=scope)[0]))
    except fluid.core.EOFException:
        return out


def _passes(exe, main, loss, reader, n=2):
    """Losses of n passes: start, run until EOFException, reset."""
    got = []
    for _ in range(n):
        reader.start()
        got += _run_to_eof(exe, main, loss)
        reader.reset()
    return got


@pytest.mark.parametrize("double", [False, True])
def test_py_reader_trains_as_feeding_does_pass_after_pass(double):
    batches = _batches()
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 3), (-1, 1)],
                                        dtypes=["float32", "int64"], use_double_buffer=double)
        x, y = fluid.layers.read_file(reader)
        loss = _net(x, y)
    reader.decorate_tensor_provider(lambda: iter(batches))
    exe = fluid.Executor()
    exe.run(startup)
    got = _passes(exe, main, loss, reader)
    assert got == _feed_losses(batches)


def test_sample_lists_with_lod_reach_the_program():
    """lod_level 1 fields: the read tensors carry the sequences' LoD."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1], dtype="int64")
        reader = fluid.layers.create_py_reader_by_data(4, [words, label])
        w, lab = fluid.layers.read_file(reader)
        pooled = fluid.layers.sequence_pool(fluid.layers.cast(w, "float32"), "sum")
    samples = [[([1, 2, 3], [0]), ([4], [1])], [([5, 6], [1])]]
    reader.decorate_paddle_reader(lambda: iter(samples))
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()
    p1, t1 = exe.run(main, fetch_list=[pooled, w], return_numpy=False)
    p2, = exe.run(main, fetch_list=[pooled])
    with pytest.raises(fluid.core.EOFException):
        exe.run(main, fetch_list=[pooled])
    reader.reset()
    assert t1.lod() == [[0, 3, 4]]
    np.testing.assert_array_equal(np.asarray(p1).ravel(), [6, 4])
    np.testing.assert_array_equal(np.asarray(p2).ravel(), [11])


class Boom(ValueError):
    pass


@pytest.mark.parametrize("double", [False, True])
def test_an_error_in_the_generator_reaches_the_caller(double):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        reader = fluid.layers.py_reader(2, [(-1, 3), (-1, 1)], ["float32", "int64"],
                                        use_double_buffer=double)
        x, y = fluid.layers.read_file(reader)
        loss = _net(x, y)
    batches = _batches(3)

    def gen():
        yield from batches[:2]
        raise Boom("bad record 17")
    reader.decorate_tensor_provider(gen)
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()
    exe.run(main, fetch_list=[loss])
    exe.run(main, fetch_list=[loss])
    with pytest.raises(Boom, match="bad record 17"):
        exe.run(main, fetch_list=[loss])
    reader.reset()
    reader.decorate_tensor_provider(lambda: iter(batches))   # the reader still works
    reader.start()
    assert len(_run_to_eof(exe, main, loss)) == 3
    reader.reset()


def test_a_batch_that_does_not_fit_the_variables_is_refused():
    """fluid.data variables are checked (need_check_feed, as Fluid's); a layers.data one
    reaches its ops as it is, and the op that reads it checks it."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3])
        y = fluid.data("y", [None, 1], dtype="int64")
        reader = fluid.layers.create_py_reader_by_data(2, [x, y], use_double_buffer=False)
        xr, yr = fluid.layers.read_file(reader)
        loss = _net(xr, yr)
    reader.decorate_batch_generator(lambda: iter([(np.zeros((2, 4), np.float32),
                                                   np.zeros((2, 1), np.int64))]))
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()
    with pytest.raises(FluidityError, match=r"has shape \[2, 4\], the variable \[-1, 3\]"):
        exe.run(main, fetch_list=[loss])
    reader.reset()
    with pytest.raises(FluidityError, match="already started"):
        reader.start()
        reader.start()
    reader.reset()


def _sum_reader(name=None):
    """A py_reader program fetching the sum of each batch's first tensor."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        reader = fluid.layers.py_reader(2, [(-1, 3), (-1, 1)], ["float32", "int64"],
                                        name=name)
        x, y = fluid.layers.read_file(reader)
        s = fluid.layers.reduce_sum(x)
    return main, startup, reader, s


def test_a_thousand_start_reset_cycles_leave_no_thread():
    main, startup, reader, s = _sum_reader()
    batches = _batches(5)
    reader.decorate_tensor_provider(lambda: iter(batches))
    exe = fluid.Executor()
    exe.run(startup)
    base = threading.active_count()
    for i in range(1000):
        reader.start()
        if i % 10 == 0:          # sometimes read a batch
            exe.run(main, fetch_list=[s])
        reader.reset()
    assert threading.active_count() == base


def _loader_program(iterable, double=True, multiprocess=False, build_net_first=False,
                    **kw):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [3])
        y = fluid.layers.data("y", [1], dtype="int64")
        if build_net_first:
            loss = _net(x, y)
        loader = fluid.io.DataLoader.from_generator(
            feed_list=[x, y], capacity=3, use_double_buffer=double, iterable=iterable,
            use_multiprocess=multiprocess, **kw)
        if not build_net_first:
            loss = _net(x, y)
    return main, startup, loader, loss


@pytest.mark.parametrize("double,multiprocess", [(True, False), (False, False),
                                                 (True, True)])
def test_iterable_dataloader_trains_as_feeding_does(double, multiprocess):
    batches = _batches()
    main, startup, loader, loss = _loader_program(True, double, multiprocess)
    loader.set_batch_generator(lambda: iter(batches))
    exe = fluid.Executor()
    exe.run(startup)
    got = [_scalar(exe.run(main, feed=data, fetch_list=[loss])[0])
           for _ in range(2) for data in loader()]
    assert got == _feed_losses(batches)


@pytest.mark.parametrize("build_net_first", [False, True])
def test_non_iterable_dataloader_trains_as_feeding_does(build_net_first):
    batches = _batches()
    main, startup, loader, loss = _loader_program(False, build_net_first=build_net_first)
    samples = [[(a[i], b[i]) for i in range(len(a))] for a, b in batches]
    loader.set_sample_list_generator(lambda: iter(samples))
    exe = fluid.Executor()
    exe.run(startup)
    got = _passes(exe, main, loss, loader)
    np.testing.assert_allclose(got, _feed_losses(batches), rtol=1e-6)


def test_sample_generator_batches_and_drops_the_last_partial_batch():
    main, startup, loader, loss = _loader_program(True, return_list=True)
    rng = np.random.default_rng(0)
    samples = [(rng.standard_normal(3).astype(np.float32), np.array([i % 2]))
               for i in range(10)]
    loader.set_sample_generator(lambda: iter(samples), batch_size=4, drop_last=True)
    shapes = [np.asarray(x).shape for x, _ in loader()]
    assert shapes == [(4, 3), (4, 3)]
    loader.set_sample_generator(lambda: iter(samples), batch_size=4, drop_last=False)
    assert [np.asarray(x).shape[0] for x, _ in loader()] == [4, 4, 2]


def test_leaving_an_iterable_loader_early_stops_its_threads_and_errors_reach_the_loop():
    main, startup, loader, loss = _loader_program(True)

    def endless():
        while True:
            yield _batches(1)[0]
    loader.set_batch_generator(endless)
    for k, _ in enumerate(loader()):
        if k == 3:
            break

    def failing():
        yield _batches(1)[0]
        raise Boom("disk gone")
    loader.set_batch_generator(failing)
    with pytest.raises(Boom, match="disk gone"):
        for _ in loader():
            pass


def test_pyreader_iterable_and_not():
    batches = _batches(4)
    for iterable in (True, False):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            x = fluid.layers.data("x", [3])
            y = fluid.layers.data("y", [1], dtype="int64")
            reader = fluid.io.PyReader(feed_list=[x, y], capacity=2, iterable=iterable)
            loss = _net(x, y)
        reader.decorate_batch_generator(lambda: iter(batches))
        exe = fluid.Executor()
        exe.run(startup)
        if iterable:
            n = sum(1 for data in reader() if exe.run(main, feed=data, fetch_list=[loss]))
        else:
            reader.start()
            n = len(_run_to_eof(exe, main, loss))
            reader.reset()
        assert n == 4


def test_shuffle_and_batch_readers_in_the_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        reader = fluid.layers.py_reader(8, [(-1, 1)], ["int64"], use_double_buffer=False)
        batched = fluid.layers.batch(fluid.layers.shuffle(reader, 5), 3)
        v = fluid.layers.read_file(fluid.layers.double_buffer(batched))   # a prefetch thread
        s = fluid.layers.reduce_sum(v)
    reader.decorate_tensor_provider(lambda: ([np.array([[i]], np.int64)] for i in range(10)))
    exe = fluid.Executor()
    exe.run(startup)
    seen = []
    for _ in range(2):
        reader.start()
        try:
            while True:
                (t,) = exe.run(main, fetch_list=[v])
                seen.append(t.ravel().tolist())
        except fluid.core.EOFException:
            reader.reset()
    assert [len(b) for b in seen] == [3, 3, 3] * 2       # the leftover 1 is dropped
    assert all(set(seen[k] + seen[k + 1] + seen[k + 2]) <= set(range(10)) for k in (0, 3))
    assert len({tuple(b) for b in seen}) > 1


def test_open_files_reads_multislot_files_with_threads(tmp_path):
    files = []
    for k in range(3):
        p = tmp_path / f"part-{k}.txt"
        p.write_text("".join(f"2 {k}.5 {i}.0 {i % 3 + 1} " + " ".join([str(i)] * (i % 3 + 1))
                             + f" 1 {i % 2}\n" for i in range(7)))
        files.append(str(p))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        reader = fluid.layers.open_files(files, shapes=[(-1, 2), (-1, 1), (-1, 1)],
                                         lod_levels=[0, 1, 0],
                                         dtypes=["float32", "int64", "int64"], thread_num=2)
        dense, ids, label = fluid.layers.read_file(fluid.layers.batch(reader, 4))
        emb = fluid.layers.sequence_pool(fluid.layers.embedding(ids, [10, 2]), "sum")
        logits = fluid.layers.fc([dense, emb], 2)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    for _ in range(2):
        rows = 0
        try:
            while True:
                d, i = exe.run(main, fetch_list=[dense, ids], return_numpy=False)
                rows += np.asarray(d).shape[0]
                assert i.lod()[0][-1] == np.asarray(i).shape[0]
        except fluid.core.EOFException:
            reader.reset()
        assert rows == 20           # 21 lines, batches of 4, the leftover one dropped


def test_running_the_startup_program_again_replaces_the_reader_stack():
    main, startup, reader, s = _sum_reader()
    batches = _batches(4)
    reader.decorate_tensor_provider(lambda: iter(batches))
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()
    exe.run(main, fetch_list=[s])          # the double buffer's thread is running
    reader.reset()
    exe.run(startup)                        # a new py reader; the old stack is stopped
    reader.start()
    got = _run_to_eof(exe, main, s)
    reader.reset()
    assert got == pytest.approx([float(a.sum()) for a, _ in batches])


def test_double_buffer_thread_over_a_synchronous_reader_hands_errors_on():
    from fluidity.core.reader import DoubleBufferReader, Reader
    from fluidity.core.tensor import LoDTensor

    class Counting(Reader):
        def __init__(self):
            super().__init__()
            self.n = 0

        def read_next(self):
            self.n += 1
            if self.n > 3:
                raise Boom("record 4 is bad")
            return [LoDTensor(np.array([self.n]))]

        def _restart(self):
            self.n = 0

    db = DoubleBufferReader(Counting())
    got = [int(np.asarray(db.read_next()[0])[0]) for _ in range(3)]
    assert got == [1, 2, 3]
    with pytest.raises(Boom, match="record 4"):
        db.read_next()
    db.reset()
    assert int(np.asarray(db.read_next()[0])[0]) == 1
    db.shutdown()


def test_reader_programs_run_from_their_serialized_descs():
    """Everything the reader ops need is in the ProgramDesc (and the queue, by name, in the
    global scope): programs parsed back from bytes read the same batches."""
    main, startup, reader, s = _sum_reader(name="saved")
    main2 = fluid.Program.parse_from_string(main.desc.SerializeToString())
    startup2 = fluid.Program.parse_from_string(startup.desc.SerializeToString())
    assert [op.type for op in startup2.global_block().ops] == ["create_py_reader"]
    assert [op.type for op in main2.global_block().ops][:2] == ["create_double_buffer_reader",
                                                                "read"]
    batches = _batches(3)
    reader.decorate_tensor_provider(lambda: iter(batches))
    exe = fluid.Executor()
    exe.run(startup2)
    reader.start()
    got = _run_to_eof(exe, main2, s.name)
    reader.reset()
    assert got == pytest.approx([float(a.sum()) for a, _ in batches])


def test_a_non_iterable_dataloader_needs_no_startup_run():
    """Fluid 1.8's DataLoader (keep_order) puts create_py_reader in the main program, which
    makes its reader on its first run and keeps it: no startup program to run first."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 2], "float32")
        loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2,
                                                    iterable=False)
        s = fluid.layers.reduce_sum(x)
    assert [op.type for op in main.global_block().ops][:3] == [
        "create_py_reader", "create_double_buffer_reader", "read"]
    assert not startup.global_block().ops
    loader.set_batch_generator(lambda: ((np.full((1, 2), i, "float32"),) for i in range(3)))
    exe = fluid.Executor()
    for _ in range(2):                                  # two passes, one reader
        loader.start()
        assert _run_to_eof(exe, main, s) == [0.0, 2.0, 4.0]
        loader.reset()

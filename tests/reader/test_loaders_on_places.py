"""Loaders over several places, as Fluid 1.8 feeds a data-parallel program: one batch per
place a step (epoch lengths), batch k of a step to place k, drop_last, non-iterable readers
read by the replicas in place order, DataLoader.from_dataset, and the private names Fluid
programs use (`py_reader.thread`, `DataLoader._reset`, `PyReader._loader`)."""
import numpy as np
import pytest

import fluidity as fluid
from fluidity import layers
from fluidity.errors import FeedError


def _batches(n, bs=2):
    """Batch i holds the value i everywhere (so where a batch went can be read back)."""
    return [(np.full((bs, 3), i, "float32"), np.full((bs, 1), i, "float32"))
            for i in range(n)]


def _program(iterable=True, n_batches=7, drop_last=True, **loader_kw):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = layers.data("x", [3])
        y = layers.data("y", [1])
        loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=4,
                                                    iterable=iterable, drop_last=drop_last,
                                                    **loader_kw)
        loss = layers.mean(layers.square_error_cost(layers.fc(x, 1), y))
        fluid.optimizer.SGD(0.01).minimize(loss)
    batches = _batches(n_batches)
    return main, startup, x, loss, loader, (lambda: iter(batches))


def test_an_iterable_loader_gives_one_batch_per_place_a_step():
    main, startup, x, loss, loader, gen = _program()
    loader.set_batch_generator(gen, places=fluid.cpu_places(2))
    steps = list(loader())
    assert len(steps) == 3                         # 7 batches, 2 places, drop_last
    assert all(len(s) == 2 for s in steps)
    assert [[int(np.array(d["x"])[0, 0]) for d in s] for s in steps] == [[0, 1], [2, 3], [4, 5]]
    # the steps train a data-parallel program; fetched x comes back place by place
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    cp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                        places=fluid.cpu_places(2))
    seen = []
    for data in loader():
        xs, l = exe.run(cp, feed=data, fetch_list=[x, loss], scope=scope,
                        return_merged=False)
        seen.append([int(a[0, 0]) for a in xs])
        assert len(l) == 2
    assert seen == [[0, 1], [2, 3], [4, 5]]


def test_drop_last_false_keeps_a_short_last_step_which_training_refuses():
    main, startup, x, loss, loader, gen = _program(drop_last=False)
    loader.set_batch_generator(gen, places=fluid.cpu_places(2))
    steps = list(loader())
    assert [len(s) for s in steps] == [2, 2, 2, 1]
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    cp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                        places=fluid.cpu_places(2))
    with pytest.raises(FeedError, match="drop_last=True"):
        exe.run(cp, feed=steps[-1], fetch_list=[loss], scope=scope)
    # one place: nothing to drop
    main, startup, x, loss, loader, gen = _program(drop_last=True)
    loader.set_batch_generator(gen, places=fluid.CPUPlace())
    assert [len(s) for s in loader()] == [1] * 7


def test_return_list_gives_a_list_of_tensors_per_place():
    main, startup, x, loss, loader, gen = _program(return_list=True)
    loader.set_batch_generator(gen, places=fluid.cpu_places(3))
    steps = list(loader())
    assert len(steps) == 2 and all(len(s) == 3 and len(s[0]) == 2 for s in steps)


def test_a_non_iterable_loader_feeds_the_replicas_in_place_order():
    with fluid.scope_guard(fluid.Scope()):    # its queue lives in the global scope
        _non_iterable_in_place_order()


def _non_iterable_in_place_order():
    main, startup, x, loss, loader, gen = _program(iterable=False)
    loader.set_batch_generator(gen)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.global_scope()
    exe.run(startup, scope=scope)
    cp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                        places=fluid.cpu_places(2))
    for _ in range(2):            # two passes
        loader.start()
        seen = []
        with pytest.raises(fluid.core.EOFException):
            while True:
                (xs,) = exe.run(cp, fetch_list=[x], scope=scope, return_merged=False)
                seen.append([int(a[0, 0]) for a in xs])
        loader.reset()
        assert seen == [[0, 1], [2, 3], [4, 5]]   # the 7th batch has no partner: EOF


def test_from_dataset_gives_one_batch_per_place(tmp_path):
    f = tmp_path / "part-0"
    # MultiSlot lines: a sequence of ids, then one label
    f.write_text("".join(f"2 {i} {i + 1} 1 {i % 2}\n" for i in range(10)))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        ids = layers.data("ids", [1], dtype="int64", lod_level=1)
        label = layers.data("label", [1], dtype="int64")
        emb = layers.sequence_pool(layers.embedding(ids, size=[12, 2]), "sum")
        loss = layers.mean(layers.cross_entropy(layers.fc(emb, 2, act="softmax"), label))
        fluid.optimizer.SGD(0.1).minimize(loss)
    # an InMemoryDataset shares its records over the places (a QueueDataset shares files,
    # and Fluid refuses fewer files than places)
    ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    ds.set_use_var([ids, label])
    ds.set_batch_size(2)
    ds.set_filelist([str(f)])
    ds.load_into_memory()
    loader = fluid.io.DataLoader.from_dataset(ds, fluid.cpu_places(2), drop_last=True)
    steps = list(loader())
    assert len(steps) == 2 and all(len(s) == 2 for s in steps)   # 5 records a place: 2 steps
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    cp = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name,
                                                        places=fluid.cpu_places(2))
    for data in loader():
        (l,) = exe.run(cp, feed=data, fetch_list=[loss], scope=scope)
        assert l.shape == (2,)


def test_py_reader_thread_and_exited_as_fluid_tests_use_them():
    with fluid.scope_guard(fluid.Scope()):    # its queue lives in the global scope
        _py_reader_thread()


def _py_reader_thread():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        reader = layers.py_reader(capacity=2, shapes=[[-1, 3]], dtypes=["float32"],
                                  use_double_buffer=False)
        x = layers.read_file(reader)
    assert reader.thread is None and reader.exited is False
    reader.decorate_batch_generator(lambda: iter([[b[0]] for b in _batches(3)]))
    exe, scope = fluid.Executor(), fluid.global_scope()
    exe.run(startup, scope=scope)
    reader.start()
    assert reader.thread is not None
    n = 0
    with pytest.raises(fluid.core.EOFException):
        while True:
            exe.run(main, fetch_list=[x], scope=scope)
            n += 1
    reader.exited = True
    reader.thread.join(timeout=30)
    assert n == 3 and not reader.thread.is_alive()
    reader.reset()


def _infinite():
    i = 0
    while True:
        yield (np.full((2, 3), i, "float32"),)
        i += 1


def test_dataloader_reset_ends_a_pass_early():
    """Fluid's test_dataloader_early_reset: stop each pass after a few batches; the next
    pass starts from the generator's beginning, and `_reset()` leaves no thread."""
    for iterable in (True, False):
        with fluid.scope_guard(fluid.Scope()):    # a non-iterable queue: global scope
            _early_reset(iterable)


def _early_reset(iterable):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = layers.data("x", [3])
        loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=4,
                                                    iterable=iterable)
        y = layers.scale(x, 1.0)
    loader.set_batch_generator(_infinite, places=fluid.CPUPlace())
    exe, scope = fluid.Executor(), fluid.global_scope()
    exe.run(startup, scope=scope)
    for _ in range(3):
        seen = []
        if iterable:
            for data in loader():
                (v,) = exe.run(main, feed=data, fetch_list=[y], scope=scope)
                seen.append(int(v[0, 0]))
                if len(seen) == 4:
                    break
            loader._reset()
        else:
            loader.start()
            for _ in range(4):
                (v,) = exe.run(main, fetch_list=[y], scope=scope)
                seen.append(int(v[0, 0]))
            loader._reset()
        assert seen == [0, 1, 2, 3]
    assert loader.thread is None or not loader.thread.is_alive()


def test_pyreader_loader_is_itself():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = layers.data("x", [3])
        r = fluid.io.PyReader(feed_list=[x], capacity=2, iterable=True)
    assert r._loader is r
    r._loader._reset()


def test_keep_data_loader_order_is_fluids_switch():
    from fluidity.reader import keep_data_loader_order
    assert keep_data_loader_order() is True
    try:
        keep_data_loader_order(False)
        assert keep_data_loader_order() is False
        main, startup, x, loss, loader, gen = _program()
        loader.set_batch_generator(gen, places=fluid.cpu_places(2))
        assert len(list(loader())) == 3          # every batch once, one per place a step
    finally:
        keep_data_loader_order(True)
    with pytest.raises(TypeError):
        keep_data_loader_order("yes")

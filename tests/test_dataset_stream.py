"""The Dataset surface of Fluid 1.6-1.8 over streamed data: pipe commands read as they run,
records kept in memory (shuffled, merged by instance id, located in their files on error),
and what runs nothing."""
import os
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity.datafeed import DataFeedDesc, MultiSlotReader
from fluidity.datafeed.errors import DataError
from fluidity.datafeed.sources import PipeSource
from fluidity.errors import ExecutionError


def _vars():
    """Two sparse int64 slots and a label, in a fresh program."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        a = fluid.layers.data("a", [1], dtype="int64", lod_level=1)
        b = fluid.layers.data("b", [1], dtype="int64", lod_level=1)
        y = fluid.layers.data("y", [1], dtype="int64")
    return main, startup, [a, b, y]


def _model():
    """A tiny model over slots a, b and label y (every slot read)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        a = fluid.layers.data("a", [1], dtype="int64", lod_level=1)
        b = fluid.layers.data("b", [1], dtype="int64", lod_level=1)
        y = fluid.layers.data("y", [1], dtype="int64")
        emb = [fluid.layers.sequence_pool(fluid.layers.embedding(
            v, [100, 4], is_sparse=True, param_attr=fluid.ParamAttr(name="w")), "sum")
            for v in (a, b)]
        p = fluid.layers.fc(fluid.layers.concat(emb, axis=1), 2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(p, y))
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, [a, b, y], loss


LINES = ["1 3 2 4 5 1 1", "2 6 7 1 8 1 0", "1 9 1 10 1 1", "1 11 3 12 13 14 1 0"]


def _files(tmp_path, lines=LINES, n=2, prefix="part"):
    out = []
    for k in range(n):
        p = tmp_path / f"{prefix}-{k}.txt"
        p.write_text("".join(line + "\n" for line in lines[k::n]))
        out.append(str(p))
    return out


def _ds(kind, use_vars, files, batch=2, threads=1, pipe=None):
    ds = getattr(fluid, kind)()
    ds.set_use_var(use_vars)
    ds.set_batch_size(batch)
    ds.set_thread(threads)
    ds.set_filelist(files)
    if pipe:
        ds.set_pipe_command(pipe)
    return ds


def test_a_pipe_is_read_while_its_command_runs(tmp_path):
    """The first batch arrives before the command ends: nothing waits for (or writes) the
    whole output. The command blocks until the marker exists, and fails after 10 s."""
    data = tmp_path / "d.txt"
    data.write_text("1 1 1 2 1 0\n" * 4)
    marker = tmp_path / "go"
    cmd = (f"cat; i=0; while [ ! -f {marker} ]; do sleep 0.02; i=$((i+1)); "
           f"[ $i -gt 500 ] && exit 7; done; echo '1 3 1 4 1 1'")
    _, _, use = _vars()
    ds = _ds("QueueDataset", use, [str(data)], batch=4, pipe=cmd)
    batches = ds.batches(drop_last=False)
    first = next(batches)
    assert first["a"].lod() == [[0, 1, 2, 3, 4]]
    marker.write_text("")
    (last,) = list(batches)
    assert np.asarray(last["a"]).ravel().tolist() == [3]


def test_a_failing_pipe_names_its_status_and_stderr(tmp_path):
    files = _files(tmp_path)
    src = PipeSource(files[0], "cat; echo oops >&2; exit 3")
    desc = DataFeedDesc.from_text(_ds("QueueDataset", _vars()[2], files).desc())
    with pytest.raises(DataError, match=r"exit status 3\): oops"):
        list(MultiSlotReader(desc, [src]))


def test_queue_and_memory_datasets_train_alike_from_pipes(tmp_path):
    files = _files(tmp_path, LINES * 8, n=2)
    results = {}
    for kind in ("QueueDataset", "InMemoryDataset"):
        main, startup, use, loss = _model()
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        ds = _ds(kind, use, files, batch=4, threads=1, pipe="sed 's/^/ /'")
        if kind == "InMemoryDataset":
            ds.load_into_memory()
            assert ds.get_memory_data_size() == 32
        res = exe.train_from_dataset(main, ds, scope=scope, fetch_list=[loss])
        assert res.examples == 32
        results[kind] = np.array(scope.find_var("w").get_tensor())
    np.testing.assert_allclose(results["QueueDataset"], results["InMemoryDataset"], rtol=1e-6)
    assert not [f for f in os.listdir(tmp_path) if not f.startswith("part-")]


def test_bad_record_in_memory_names_its_file_and_line(tmp_path):
    files = _files(tmp_path, LINES + ["1 x 1 2 1 0", "1 5 1 6 1 1"], n=2)
    main, startup, use, loss = _model()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    ds = _ds("InMemoryDataset", use, files, batch=2)
    ds.load_into_memory()
    ds.local_shuffle()
    with pytest.raises(ExecutionError, match=r"part-0\.txt:3: slot 'a': value 'x'"):
        exe.train_from_dataset(main, ds, scope=scope)


def test_shuffle_keeps_the_records_and_trains_every_pass(tmp_path):
    files = _files(tmp_path, LINES * 5, n=2)
    main, startup, use, loss = _model()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    ds = _ds("InMemoryDataset", use, files, batch=3, threads=2)
    ds.preload_into_memory()
    ds.wait_preload_done()
    before = sorted(ds.dataset.memory.records)
    ds.local_shuffle()
    ds.global_shuffle()                       # no fleet: this trainer's records
    assert sorted(ds.dataset.memory.records) == before
    for _ in range(2):
        res = exe.train_from_dataset(main, ds, scope=scope, thread=2)
        assert res.examples == 20 and len(res.workers) == 2
    assert ds.get_memory_data_size() == ds.get_shuffle_data_size() == 20
    ds.release_memory()
    with pytest.raises(ValueError, match="load_into_memory"):
        ds.get_memory_data_size()


def test_merge_by_lineid(tmp_path):
    # instance ids first ("1 <id>"); slots a, b, y. id1's two records hold different
    # sparse slots and merge; id2 has both records with slot a (a conflict: dropped); id3
    # has one record (not merge_size: dropped)
    lines = ["1 id1 1 5 1 0 1 1", "1 id1 1 0 2 6 7 1 1", "1 id2 1 1 1 0 1 0",
             "1 id2 1 2 1 0 1 0", "1 id3 1 9 1 9 1 1"]
    files = _files(tmp_path, lines, n=1)
    _, _, use = _vars()
    ds = _ds("InMemoryDataset", use, files)
    ds.set_merge_by_lineid(2)
    ds.load_into_memory()
    assert ds.dataset.memory.ins_ids[:2] == ["id1", "id1"]
    ds.global_shuffle()                              # merges after the shuffle
    assert ds.dataset.memory.records == [b"1 5 2 6 7 1 1"]
    assert ds.get_memory_data_size() == 1


def test_slots_shuffle_and_local_tables(tmp_path):
    files = _files(tmp_path, LINES * 3, n=1)
    _, _, use = _vars()
    ds = _ds("InMemoryDataset", use, files)
    ds.load_into_memory()
    layout = ds.dataset.layout()
    col = lambda s: sorted(tuple(layout.split(r, None)[s])       # noqa: E731
                           for r in ds.dataset.memory.records)
    b_before, a_before = col(1), col(0)
    ds.set_fea_eval(100, True)
    ds.slots_shuffle(["b"])
    assert col(0) == a_before                      # other slots untouched
    assert set(col(1)) <= set(b_before)            # b's values come from other records
    ds.generate_local_tables_unlock(0, 8, 1, 1, 2)
    (ids0, v0), (ids1, v1) = ds.dataset.local_tables[0]
    every = {int(t) for r in ds.dataset.memory.records
             for s in (0, 1) for t in layout.split(r, None)[s]}
    assert set(ids0.tolist()) | set(ids1.tolist()) == every
    assert all(int(i) % 2 == 0 for i in ids0) and v0.shape == (len(ids0), 8)
    with pytest.raises(DataError, match="unknown slot"):
        ds.slots_shuffle(["nope"])


def test_what_runs_nothing(tmp_path):
    main, startup, use, loss = _model()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    empty = _ds("QueueDataset", use, [])
    res = exe.train_from_dataset(main, empty, scope=scope, fetch_list=[loss])
    assert res.examples == 0 and list(res) == [0.0]
    # a program with no ops reads no slot: nothing runs, even over data it could not feed
    bad = tmp_path / "bad.txt"
    bad.write_text("1 1 1 3 2 4 5\n")            # the dense label y has 2 values
    only_vars, _, use2 = _vars()
    res = exe.train_from_dataset(only_vars, _ds("QueueDataset", use2, [str(bad)]))
    assert res.examples == 0
    with pytest.raises(DataError, match="dense slot 'y'"):
        list(_ds("QueueDataset", use2, [str(bad)]).batches())
    with pytest.raises(RuntimeError, match="^dataset is need and should be initialized$"):
        exe.train_from_dataset(main, None)


def test_a_slot_no_op_reads_is_not_fed(tmp_path):
    """A third slot `junk` (dense, shape [1]) has two values per line: fed, it would be an
    error; no op reads it, so only its counts are checked."""
    p = tmp_path / "d.txt"
    p.write_text("1 3 1 4 2 7 7 1 1\n1 5 1 6 2 8 8 1 0\n")
    main, startup, use, loss = _model()
    with fluid.program_guard(main, startup):
        junk = fluid.layers.data("junk", [1], dtype="int64")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    ds = _ds("QueueDataset", use[:2] + [junk, use[2]], [str(p)])
    assert exe.train_from_dataset(main, ds, scope=scope).examples == 2
    with pytest.raises(DataError, match="dense slot 'junk'"):
        list(ds.batches())


def test_dataloader_gives_one_batch_per_place(tmp_path):
    files = _files(tmp_path, LINES * 4, n=4)       # 4 files of 4 lines
    main, startup, use, loss = _model()
    ds = _ds("QueueDataset", use, files, batch=2)
    loader = fluid.io.DataLoader.from_dataset(ds, fluid.cpu_places(2), drop_last=True)
    assert isinstance(loader, fluid.io.DataLoaderBase)
    steps = list(loader())
    assert len(steps) == 4 and all(len(s) == 2 for s in steps)
    assert steps[0][0]["a"]._place()._equals(fluid.CPUPlace())
    with pytest.raises(ValueError, match="not less than place number"):
        fluid.io.DataLoader.from_dataset(_ds("QueueDataset", use, files[:1]),
                                         fluid.cpu_places(2))


def test_core_dataset_and_remote_paths(tmp_path):
    d = fluid.core.Dataset("MultiSlotDataset")
    d.set_thread_num(12)
    d.set_filelist(["a.txt", "b.txt"])
    d.set_trainer_num(4)
    d.set_hdfs_config("fs", "ugi")
    d.set_download_cmd("./get")
    assert (d.get_thread_num(), d.get_filelist(), d.get_trainer_num(), d.get_hdfs_config(),
            d.get_download_cmd()) == (12, ["a.txt", "b.txt"], 4, ("fs", "ugi"), "./get")
    # a remote path is fetched by the download command, then piped
    local = tmp_path / "remote.txt"
    local.write_text("1 1 1 2 1 1\n")
    _, _, use = _vars()
    ds = _ds("InMemoryDataset", use, [], pipe="cat")
    ds.set_filelist(["hdfs:/data/part-0"])
    ds.set_download_cmd(f"{sys.executable} -c \"import sys; print(open('{local}').read(), "
                        f"end='') if sys.argv[1] == 'hdfs:/data/part-0' else sys.exit(2)\"")
    ds.load_into_memory()
    assert ds.get_memory_data_size() == 1
    with pytest.raises(ValueError, match="no HDFS client"):
        ds.set_hdfs_config("fs", "ugi")
    ds2 = _ds("QueueDataset", use, [])
    ds2.set_filelist(["hdfs:/x"])
    with pytest.raises(DataError, match="set_download_cmd"):
        list(ds2.batches())


def test_fetch_handler_takes_names(tmp_path):
    files = _files(tmp_path, LINES * 4, n=1)
    main, startup, use, loss = _model()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    got = []

    class Keep(fluid.executor.FetchHandler):
        def handler(self, res_dict):
            got.append(res_dict)
    exe.train_from_dataset(main, _ds("QueueDataset", use, files), scope=scope,
                           fetch_handler=Keep("w", period_secs=30))
    assert list(got[-1]) == ["w"] and got[-1]["w"].shape == (100, 4)
    assert list(fluid.executor.FetchHandler(["w", loss]).var_dict) == ["w", loss.name]

"""Datasets and exe.train_from_dataset / infer_from_dataset, on generated CTR data."""
import json
import os

import numpy as np
import pytest

import fluidity as fluid
from fluidity.datafeed.generate import generate_ctr
from fluidity.errors import FluidityError
from fluidity.executor.async_executor import AsyncExecutor
from executor.test_async_executor import heldout_logloss as heldout, wide_model


@pytest.fixture(scope="module")
def ctr(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctr")
    kw = dict(seed=7, vocab=500, sparse_slots=2, dense_slots=2)
    info = generate_ctr(str(d), 6000, files=2, **kw)
    test = generate_ctr(str(d), 2000, files=1, prefix="test", **kw)
    return {"train": sorted(info["files"]), "test": test["files"],
            "model": json.load(open(info["model"])), "test_info": test}


def wide(model):
    """test_async_executor's logistic regression, and its data variables in slot order."""
    main, startup, loss, logit = wide_model(model)
    block = main.global_block()
    names = [model["dense_slot"]] + model["sparse_slots"] + [model["label_slot"]]
    return main, startup, [block.var(n) for n in names], loss, logit


def _dataset(kind, use_vars, files, threads=1, batch=32, pipe=None):
    ds = fluid.DatasetFactory().create_dataset(kind)
    ds.set_use_var(use_vars)
    ds.set_batch_size(batch)
    ds.set_thread(threads)
    ds.set_filelist(files)
    if pipe:
        ds.set_pipe_command(pipe)
    return ds


def _trained(ctr, run):
    main, startup, use_vars, loss, logit = wide(ctr["model"])
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    desc = _dataset("QueueDataset", use_vars, ctr["train"]).data_feed_desc()
    before = heldout(exe, scope, main, logit, desc, ctr["test"])
    res = run(exe, scope, main, use_vars, loss)
    after = heldout(exe, scope, main, logit, desc, ctr["test"])
    assert after < before - 0.05
    return after, res


def test_train_from_dataset_reaches_the_loss_of_async_executor(ctr):
    def by_async(exe, scope, main, use_vars, loss):
        desc = _dataset("QueueDataset", use_vars, ctr["train"]).data_feed_desc()
        return AsyncExecutor().run(main, desc, ctr["train"], 1, fetch=[loss], scope=scope)

    def by_dataset(exe, scope, main, use_vars, loss):
        ds = _dataset("QueueDataset", use_vars, ctr["train"])
        return exe.train_from_dataset(main, ds, scope=scope, fetch_list=[loss],
                                      print_period=20)

    ref, ref_res = _trained(ctr, by_async)
    got, res = _trained(ctr, by_dataset)
    assert res.examples == ref_res.examples == 6000
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_in_memory_dataset_piped_and_shuffled_trains_with_two_threads(ctr, tmp_path):
    # the files get a junk first column that the pipe command cuts away
    raw = []
    for k, f in enumerate(ctr["train"]):
        p = tmp_path / f"raw-{k}.txt"
        p.write_text("".join(f"junk{i} {line}" for i, line in enumerate(open(f))))
        raw.append(str(p))

    def by_dataset(exe, scope, main, use_vars, loss):
        ds = _dataset("InMemoryDataset", use_vars, raw, threads=2, pipe="cut -d ' ' -f 2-")
        ds.load_into_memory()
        assert ds.get_memory_data_size() == 6000
        ds.local_shuffle()
        ds.global_shuffle()
        res = exe.train_from_dataset(main, ds, scope=scope, thread=2, fetch_list=[loss])
        res2 = exe.train_from_dataset(main, ds, scope=scope)      # the shards are reused
        ds.release_memory()
        with pytest.raises(FluidityError, match="load_into_memory"):
            ds.get_memory_data_size()
        return res, res2

    got, (res, res2) = _trained(ctr, by_dataset)
    assert res.examples == res2.examples == 6000 and len(res.workers) == 2


def test_infer_from_dataset_leaves_the_parameters_alone(ctr):
    main, startup, use_vars, loss, logit = wide(ctr["model"])
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    ds = _dataset("QueueDataset", use_vars, ctr["train"], threads=2)
    exe.train_from_dataset(main, ds, scope=scope)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.global_block().all_parameters()}
    res = exe.infer_from_dataset(main, ds, scope=scope, fetch_list=[loss])
    assert res.examples == 6000 and 0 < res[0] < 1
    for name, value in params.items():
        np.testing.assert_array_equal(np.array(scope.find_var(name).get_tensor()), value)


def test_dataloader_from_dataset_and_id_zero_is_kept(ctr, tmp_path):
    p = tmp_path / "zeros.txt"
    p.write_text("2 0.5 1.0 2 0 5 1 0 1 1\n2 0.1 0.2 1 3 1 0 1 0\n" * 3)
    main, startup, use_vars, loss, logit = wide(ctr["model"])
    ds = _dataset("InMemoryDataset", use_vars, [str(p)], batch=2)
    ds.load_into_memory()
    loader = fluid.io.DataLoader.from_dataset(ds, [fluid.CPUPlace()], drop_last=True)
    exe = fluid.Executor()
    exe.run(startup)
    batches = list(loader())
    assert len(batches) == 3
    ids0 = batches[0][0][ctr["model"]["sparse_slots"][0]]
    assert ids0.lod() == [[0, 2, 3]] and np.asarray(ids0).ravel().tolist() == [0, 5, 3]
    for data in batches:
        exe.run(main, feed=data, fetch_list=[loss])


def test_dataset_errors(ctr):
    main, startup, use_vars, loss, logit = wide(ctr["model"])
    with pytest.raises(FluidityError, match="unknown dataset"):
        fluid.DatasetFactory().create_dataset("FooDataset")
    q = _dataset("QueueDataset", use_vars, ctr["train"])
    with pytest.raises(FluidityError, match="does not support local shuffle"):
        q.local_shuffle()
    with pytest.raises(FluidityError, match="no such file"):
        q.set_filelist(["/nonexistent/part-0"])
    bad = _dataset("QueueDataset", use_vars, ctr["train"], pipe="exit 3")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(FluidityError, match="exit status 3"):
        exe.train_from_dataset(main, bad, scope=scope)
    with pytest.raises(FluidityError, match="DatasetFactory"):
        exe.train_from_dataset(main, object(), scope=scope)
    assert not any(os.path.basename(f).startswith("piped") for f in ctr["train"])


def test_fetch_handler_is_called_on_its_period_and_at_the_end(ctr):
    main, startup, use_vars, loss, logit = wide(ctr["model"])
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    param = main.global_block().all_parameters()[0]
    calls = []

    class Keep(fluid.executor.FetchHandler):
        def handler(self, res_dict):
            calls.append(res_dict)

    ds = _dataset("QueueDataset", use_vars, ctr["train"])
    handler = Keep({"w": param, "loss": loss, "logit": logit}, period_secs=0.01)
    exe.train_from_dataset(main, ds, scope=scope, fetch_list=[loss], print_period=5,
                           fetch_handler=handler)
    assert len(calls) >= 1
    last = calls[-1]                 # the call at the end: the trained parameter
    np.testing.assert_array_equal(last["w"], np.array(scope.find_var(param.name).get_tensor()))
    assert last["loss"].shape == (1,) and 0 < last["loss"][0] < 1   # the latest report's mean
    assert last["logit"] is None     # neither persistable nor fetched: None, as in Paddle


def test_fetch_handler_errors(ctr, capsys):
    main, startup, use_vars, loss, logit = wide(ctr["model"])
    with pytest.raises(TypeError):
        fluid.executor.FetchHandler(None)
    with pytest.raises(ValueError):
        fluid.executor.FetchHandler({"loss": loss}, period_secs=0)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    ds = _dataset("QueueDataset", use_vars, ctr["train"][:1])
    with pytest.raises(TypeError, match="FetchHandler"):
        exe.train_from_dataset(main, ds, scope=scope, fetch_handler=lambda res: None)

    class Broken(fluid.executor.FetchHandler):
        def handler(self, res_dict):
            raise RuntimeError("handler broke")
    with pytest.raises(RuntimeError, match="handler broke"):
        exe.infer_from_dataset(main, ds, scope=scope, fetch_handler=Broken({"l": loss}))
    # the default handler prints the first element of each value
    param = main.global_block().all_parameters()[0]
    exe.infer_from_dataset(main, ds, scope=scope,
                           fetch_handler=fluid.executor.FetchHandler({"w": param}))
    assert "w[0]: " in capsys.readouterr().out

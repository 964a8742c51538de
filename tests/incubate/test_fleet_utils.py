"""fluid.incubate.fleet.utils as Fluid 1.8 has it: FleetUtil's metrics and program checks,
the pruned-program utilities, the HDFS client (over a stand-in `hadoop fs`) and the trainers'
HDFS barrier."""
import os
import stat
import sys

import numpy as np
import pytest

import fluidity as fluid
from fluidity.incubate.fleet.base import role_maker
from fluidity.incubate.fleet.parameter_server.distribute_transpiler import fleet
from fluidity.incubate.fleet.utils import fleet_barrier_util, hdfs, utils
from fluidity.incubate.fleet.utils.fleet_util import FleetUtil, bucket_auc

HERE = os.path.dirname(os.path.abspath(__file__))


class Config:
    pass


def _model():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        a = fluid.layers.data("a", [4])
        b = fluid.layers.data("b", [3])
        h = fluid.layers.fc(fluid.layers.concat([a, b], axis=1), 5, act="relu")
        out = fluid.layers.fc(h, 1, act="sigmoid", name="similarity_norm")
    return main, startup, out


def _saved_model(tmp_path):
    """A pruned model saved as a CTR team ships it: the program as .pbtxt and the
    parameters in one file; the training program beside it."""
    main, startup, out = _model()
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        fluid.io.save_inference_model(str(tmp_path), ["a", "b"], [out], exe, main,
                                      model_filename="model.bin", params_filename="params")
    pruned = utils.load_program(str(tmp_path / "model.bin"))
    utils.save_program(pruned, str(tmp_path / "pruned.pbtxt"), is_text=True)
    utils.save_program(main, str(tmp_path / "train.pbtxt"), is_text=True)
    return main, scope, out


def test_modes():
    FleetUtil()
    FleetUtil(mode="transpiler")
    with pytest.raises(ValueError, match="pslib"):
        FleetUtil("other")
    with pytest.raises(ImportError, match="pslib"):
        FleetUtil().save_model("/out", 20200101, 1)
    with pytest.raises(ImportError, match="pslib"):
        FleetUtil().rank0_print("needs pslib's fleet")


def test_program_files_round_trip_and_refuse_garbage(tmp_path):
    main, _, _ = _model()
    utils.save_program(main, str(tmp_path / "p.bin"))
    text = FleetUtil().program_type_trans(str(tmp_path), "p.bin", False)
    assert text == "p.bin.pbtxt"
    assert "blocks {" in (tmp_path / text).read_text()
    back = utils.program_type_trans(str(tmp_path), text, True)
    assert back == "p.bin.pbtxt.bin"
    assert utils.load_program(str(tmp_path / back)).desc == \
        utils.load_program(str(tmp_path / "p.bin")).desc
    (tmp_path / "bad.pbtxt").write_text("blocks { idx: 'x' }")
    with pytest.raises(ValueError, match="bad.pbtxt"):
        utils.load_program(str(tmp_path / "bad.pbtxt"), is_text=True)
    (tmp_path / "bad.bin").write_bytes(b"\xff\x00garbage")
    with pytest.raises(ValueError, match="bad.bin"):
        utils.load_program(str(tmp_path / "bad.bin"))


def test_parse_program_proto(tmp_path):
    main, _, _ = _model()
    utils.save_program(main, str(tmp_path / "p.pbtxt"), is_text=True)
    FleetUtil().parse_program_proto(str(tmp_path / "p.pbtxt"), True, str(tmp_path))
    ops = (tmp_path / "ops.log").read_text().splitlines()
    assert ops[0] == "ops:" and len(ops) == 1 + len(main.global_block().ops)
    assert "'type': 'mul'" in ops[2]
    pers = (tmp_path / "vars_persistable.log").read_text().splitlines()
    assert pers[0] == "persistable vars:"
    assert sorted(eval(x)["name"] for x in pers[1:]) == sorted(
        p.name for p in main.global_block().all_parameters())
    assert len((tmp_path / "vars_all.log").read_text().splitlines()) == \
        1 + len(list(main.list_vars()))


def test_check_two_programs(tmp_path):
    main, _, _ = _saved_model(tmp_path)
    conf = Config()
    conf.train_prog_path, conf.is_text_train_program = str(tmp_path / "train.pbtxt"), True
    conf.pruned_prog_path, conf.is_text_pruned_program = str(tmp_path / "pruned.pbtxt"), True
    conf.draw, conf.draw_out_name = True, "pruned_check"
    assert FleetUtil().check_two_programs(conf)
    assert (tmp_path / "pruned_check.dot").exists()
    # a parameter of another shape in the pruned program
    pruned = utils.load_program(str(tmp_path / "pruned.pbtxt"), True)
    w = [p for p in pruned.list_vars() if p.persistable and p.name.endswith("w_0")][0]
    del w.desc.type.lod_tensor.tensor.dims[:]
    w.desc.type.lod_tensor.tensor.dims.extend([2, 2])
    utils.save_program(pruned, str(tmp_path / "mismatch.pbtxt"), True)
    conf.pruned_prog_path, conf.draw = str(tmp_path / "mismatch.pbtxt"), False
    assert not FleetUtil().check_two_programs(conf)


def _dump_config(tmp_path, files=None):
    feed, fetch, conf = Config(), Config(), Config()
    feed.feeded_vars_names = ["a", "b"]
    feed.feeded_vars_dims = [4, 3]
    feed.feeded_vars_types = [np.float32, np.float32]
    feed.feeded_vars_filelist = files
    fetch.fetch_vars_names = None
    conf.batch_size, conf.feed_config, conf.fetch_config = 2, feed, fetch
    conf.dump_model_dir = str(tmp_path)
    conf.dump_program_filename = "pruned.pbtxt"
    conf.is_text_dump_program = True
    conf.save_params_filename = "params"
    return conf


def test_check_vars_and_dump_runs_the_saved_model(tmp_path):
    main, scope, out = _saved_model(tmp_path)
    a = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
    b = np.arange(6, dtype=np.float32).reshape(2, 3) / -6
    (tmp_path / "a.txt").write_text(" ".join(map(str, a.reshape(-1))) + "\n")
    (tmp_path / "b.txt").write_text(" ".join(map(str, b[0])) + "\n" + " ".join(map(str, b[1])))
    conf = _dump_config(tmp_path, [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")])
    got = FleetUtil().check_vars_and_dump(conf)
    ref = fluid.Executor().run(main.clone(for_test=True), feed={"a": a, "b": b},
                               fetch_list=[out.name], scope=scope)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6)
    conf = _dump_config(tmp_path)            # random inputs
    assert FleetUtil().check_vars_and_dump(conf)[0].shape == (2, 1)
    conf = _dump_config(tmp_path)
    conf.feed_config.feeded_vars_dims = [5, 3]
    with pytest.raises(RuntimeError, match="feed variable 'a' shape not match"):
        FleetUtil().check_vars_and_dump(conf)


def test_global_auc_and_metrics_on_one_worker(capsys):
    """The AUC from the auc op's buckets equals the op's own; the CTR metrics follow
    their definitions."""
    fleet.init(role_maker.UserDefinedRoleMaker(current_id=0, role=role_maker.Role.WORKER,
                                               worker_num=1,
                                               server_endpoints=["127.0.0.1:6001"]))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        p = fluid.layers.data("p", [1])
        y = fluid.layers.data("y", [1], dtype="int64")
        pred = fluid.layers.concat([1 - p, p], axis=1)
        auc, _, [_, _, stat_pos, stat_neg] = fluid.layers.auc(pred, y, num_thresholds=63)
    rng = np.random.default_rng(3)
    pv = rng.random((40, 1)).astype(np.float32)
    yv = (rng.random((40, 1)) < pv).astype(np.int64)
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    (auc_v,) = exe.run(main, feed={"p": pv, "y": yv}, fetch_list=[auc], scope=scope)
    util = FleetUtil(mode="transpiler")
    got = util.get_global_auc(scope, stat_pos.name, stat_neg.name)
    assert got == pytest.approx(float(auc_v), rel=1e-12)
    for name, value in [("sqrerr", ((pv - yv) ** 2).sum()), ("abserr", abs(pv - yv).sum()),
                        ("prob", pv.sum()), ("q", pv.sum()), ("pos", yv.sum()),
                        ("total", 40.0)]:
        scope.var(name).get_tensor().set(np.array([value], np.float64))
    m = util.get_global_metrics(scope, stat_pos.name, stat_neg.name)
    assert m[0] == pytest.approx(got) and m[8] == 40
    assert m[2] == pytest.approx(abs(pv - yv).mean(), rel=1e-6)
    assert m[3] == pytest.approx(np.sqrt(((pv - yv) ** 2).mean()), rel=1e-6)
    assert m[4] == pytest.approx(yv.mean()) and m[6] == pytest.approx(yv.mean() / pv.mean())
    util.print_global_metrics(scope, stat_pos.name, stat_neg.name, print_prefix="day1")
    assert "day1 global AUC=" in capsys.readouterr().out
    assert util.get_global_metrics(scope, "nope", stat_neg.name) == [None] * 9
    util.set_zero(stat_pos.name, scope)
    assert not np.array(scope.find_var(stat_pos.name).get_tensor()).any()


def test_bucket_auc_against_pair_counting():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 5, 16), rng.integers(0, 5, 16)
    pairs = sum(pos[i] * neg[j] * (1.0 if i > j else 0.5 if i == j else 0.0)
                for i in range(16) for j in range(16))
    assert bucket_auc(pos, neg) == pytest.approx(pairs / (pos.sum() * neg.sum()))
    assert bucket_auc([0, 3], [0, 0]) == 0.5


def test_online_pass_interval():
    got = FleetUtil().get_online_pass_interval("{20190720..20190721}", "{0..23}", 5, 2, False)
    assert len(got) == 144 and got[0] == ["0000", "0005"] and got[-1] == ["2350", "2355"]
    hourly = FleetUtil().get_online_pass_interval("20190720", "{08..09}", 30, 2, True)
    assert hourly == [["08", "08"], ["09", "09"]]
    with pytest.raises(ValueError, match="1440"):
        FleetUtil().get_online_pass_interval("x", "{0..23}", 7, 2, False)


@pytest.fixture
def hadoop(tmp_path, monkeypatch):
    """A HADOOP_HOME whose bin/hadoop is the stand-in over tmp_path/hdfs."""
    home = tmp_path / "hadoop home"
    (home / "bin").mkdir(parents=True)
    script = home / "bin" / "hadoop"
    script.write_text(f"#!/bin/sh\nexec '{sys.executable}' -S "
                      f"'{os.path.join(HERE, 'fake_hadoop.py')}' \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "hdfs").mkdir()
    monkeypatch.setenv("FAKE_HDFS_ROOT", str(tmp_path / "hdfs"))
    monkeypatch.setenv("HADOOP_HOME", str(home))
    monkeypatch.setattr(hdfs, "RETRY_SLEEP_S", 0)
    return str(home)


def test_hdfs_client(hadoop, tmp_path):
    c = hdfs.HDFSClient(hadoop, {"fs.default.name": "hdfs://x:1", "hadoop.job.ugi": "u,p"})
    assert not c.is_exist("/data") and c.ls("/data") == []
    assert c.makedirs("/data/day 1")            # a space stays inside one argument
    assert c.is_dir("/data/day 1") and not c.is_file("/data/day 1")
    local = tmp_path / "up"
    local.mkdir()
    for k in range(3):
        (local / f"part-{k}").write_text(f"line {k}\n")
    c.upload("/data/day 1", str(local), multi_processes=2)
    assert c.ls("/data/day 1") == [f"/data/day 1/part-{k}" for k in range(3)]
    assert c.lsr("/data", excludes=["/data/day 1/part-1"]) == ["/data/day 1/part-0",
                                                                "/data/day 1/part-2"]
    assert c.is_file("/data/day 1/part-0") and c.cat("/data/day 1/part-0") == "line 0"
    assert c.rename("/data/day 1/part-2", "/data/day 1/part-9")
    got = c.download("/data/day 1", str(tmp_path / "down"), multi_processes=2)
    assert sorted(os.path.basename(g) for g in got) == ["part-0", "part-1", "part-9"]
    assert c.delete("/data") and not c.is_exist("/data")
    assert hdfs.HDFSClient.split_files(list(range(7)), 0, 3) == [0, 1, 2]
    assert hdfs.HDFSClient.split_files(list(range(7)), 2, 3) == [5, 6]


def test_contrib_client_and_tree_transfers(hadoop, tmp_path):
    from fluidity.contrib.utils import HDFSClient, multi_download, multi_upload
    c = HDFSClient(hadoop, {})
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a").write_text("a")
    (tree / "sub" / "b").write_text("b")
    multi_upload(c, "/t", str(tree), multi_processes=2)
    assert sorted(c.lsr("/t")) == ["/t/a", "/t/sub/b"]
    assert not c.upload("/t", str(tree / "a"))               # there, and no overwrite
    (tree / "a").write_text("a2")
    assert c.upload("/t", str(tree / "a"), overwrite=True) and c.cat("/t/a") == "a2"
    got = [multi_download(c, "/t", str(tmp_path / f"d{k}"), k, 2) for k in range(2)]
    # the listing's order (same minute: as listed): trainer 0 gets a, trainer 1 sub/b
    assert [[os.path.relpath(p, tmp_path) for p in g] for g in got] == [["d0/a"],
                                                                        ["d1/sub/b"]]
    assert all(os.path.exists(p) for g in got for p in g)
    with pytest.raises(TypeError, match="HDFSClient"):
        multi_upload("client", "/t", str(tree))


def test_hdfs_client_without_hadoop_fails_fast(tmp_path):
    c = hdfs.HDFSClient(str(tmp_path / "none"), {})
    assert not c.is_exist("/x") and c.ls("/x") == [] and c.cat("/x") == ""
    assert c.makedirs("/x") is False
    with pytest.raises(TypeError, match="configs"):
        hdfs.HDFSClient("/h", ["not", "a", "dict"])


def test_trainers_barrier(hadoop, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fleet.init(role_maker.UserDefinedRoleMaker(current_id=0, role=role_maker.Role.WORKER,
                                               worker_num=1,
                                               server_endpoints=["127.0.0.1:6001"]))
    fleet_barrier_util.check_all_trainers_ready("/ready_path/", 0)
    assert os.listdir(tmp_path / "hdfs" / "ready_path") == ["ready.0.0.done"]
    fleet.init(role_maker.UserDefinedRoleMaker(current_id=1, role=role_maker.Role.WORKER,
                                               worker_num=3,
                                               server_endpoints=["127.0.0.1:6001"]))
    monkeypatch.setattr(fleet_barrier_util, "POLL_S", 0.01)
    with pytest.raises(TimeoutError, match="2 of 3 trainers ready"):
        fleet_barrier_util.check_all_trainers_ready("/ready_path/", 0, timeout_s=0.1)

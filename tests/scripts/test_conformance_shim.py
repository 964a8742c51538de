"""The conformance run's `paddle` shim: Paddle's module names resolve to Fluidity's, and the
synthetic data sets have the real ones' sample structure (scripts/conformance)."""
import importlib
import importlib.util
import os
import re
import string
import subprocess
import sys

import numpy as np
import pytest

from tests.paths import ROOT

SHIM = os.path.join(ROOT, "scripts", "conformance", "shim")


def _run(code):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SHIM, ROOT]))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_paddle_fluid_modules_are_fluiditys():
    r = _run("import paddle, paddle.fluid as fluid, paddle.fluid.core as core\n"
             "import fluidity, fluidity.core\n"
             "from paddle.fluid.framework import Program\n"
             "assert fluid is fluidity and core is fluidity.core\n"
             "assert Program is fluidity.framework.Program\n"
             "assert paddle.batch is fluidity.batch\n"
             "import paddle.fluid.no_such_module\n")
    assert "No module named 'paddle.fluid.no_such_module'" in r.stderr, r.stderr


def test_synthetic_data_sets_have_the_real_sample_structure():
    sys.path.insert(0, SHIM)
    try:
        ds = importlib.import_module("paddle.dataset")
        x, y = next(ds.uci_housing.train()())
        assert x.shape == (13,) and x.dtype == np.float32 and y.shape == (1,)
        img, label = next(ds.mnist.train()())
        assert img.shape == (784,) and -1 <= img.min() and img.max() <= 1 and 0 <= label < 10
        img, label = next(ds.cifar.train10()())
        assert img.shape == (3072,) and 0 <= label < 10
        words = ds.imikolov.build_dict()
        assert all(0 <= w < len(words) for w in next(ds.imikolov.train(words, 5)()))
        src, trg, nxt = next(ds.wmt14.train(30)())
        assert src[0] == 0 and src[-1] == 1 and trg[1:] == nxt[:-1]
        sample = next(ds.movielens.train()())
        assert len(sample) == 8 and isinstance(sample[5], list) and 1 <= sample[7][0] <= 5
        seqs = next(ds.conll05.test()())
        assert len(seqs) == 9 and len({len(s) for s in seqs}) == 1
        a, b = list(ds.uci_housing.train()()), list(ds.uci_housing.train()())  # seeded
        assert all(np.array_equal(u[0], v[0]) and u[1] == v[1] for u, v in zip(a, b))
    finally:
        sys.path.remove(SHIM)
        for name in [m for m in sys.modules if m == "paddle" or m.startswith("paddle.")]:
            del sys.modules[name]


def test_importing_a_module_by_its_paddle_name_keeps_the_layers_attributes():
    """`from paddle.fluid.layers.rnn import ...` leaves `fluid.layers.rnn` the function, as
    Fluid 1.8's package does (its modules are in sys.modules before any test imports them)."""
    r = _run("import paddle.fluid as fluid\n"
             "from paddle.fluid.layers.rnn import LSTMCell\n"
             "from paddle.fluid.layers import rnn\n"
             "assert callable(rnn) and not hasattr(rnn, '__path__'), rnn\n"
             "assert fluid.layers.rnn is rnn and LSTMCell is fluid.layers.LSTMCell\n")
    assert r.returncode == 0, r.stderr


def test_test_classes_run_in_unittests_order(tmp_path):
    """Paddle's CI runs a file with unittest (classes by name); the run does the same."""
    (tmp_path / "test_order.py").write_text(
        "import unittest\nseen = []\n"
        "class TestB(unittest.TestCase):\n    def test_b(self): seen.append('B')\n"
        "class TestA(unittest.TestCase):\n"
        "    def test_z(self): seen.append('Az')\n    def test_a(self): seen.append('Aa')\n"
        "class TestC(unittest.TestCase):\n"
        "    def test_c(self): assert seen == ['Aa', 'Az', 'B'], seen\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SHIM, ROOT]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "unittest_order", "test_order.py"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "4 passed" in r.stdout, r.stdout + r.stderr


def test_a_failures_own_error_is_reported_before_a_teardown_error():
    """OpTest.tearDownClass asserts that op_type was set, which fails whenever a test failed
    first; pytest prints that teardown error before the failure that caused it."""
    spec = importlib.util.spec_from_file_location(
        "conformance_run", os.path.join(ROOT, "scripts", "conformance", "run.py"))
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    out = ("==== ERRORS ====\nE   AssertionError: This test do not have op_type in class "
           "attrs\n==== FAILURES ====\nE   ValueError: conv2d: the real cause\n")
    assert run.first_error(out) == "ValueError: conv2d: the real cause"
    assert run.first_error("E   KeyError: 'x'\n") == "KeyError: 'x'"


def test_files_paddles_cpu_ci_does_not_run_are_out_of_scope_with_the_reason():
    spec = importlib.util.spec_from_file_location(
        "conformance_scope", os.path.join(ROOT, "scripts", "conformance", "scope.py"))
    scope = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scope)
    category, why = scope.classify("test_allreduce.py", "import paddle.fluid as fluid\n")
    assert category == "not run by Paddle on a CPU" and "GPU build only" in why
    assert "disabled" in scope.classify("test_basic_lstm_api.py", "")[1]
    assert scope.classify("test_adam_op.py", "import paddle.fluid as fluid\n") is None
    assert scope.classify("test_dataset_download.py", "")[0] == "needs the network"
    assert scope.classify("test_mul_op.py", "out = paddle.mul(x, y)\n")[0] == "paddle 2.0 API"
    assert scope.classify("test_fit.py", "r = paddle.batch(paddle.dataset.uci_housing.train(),"
                          " 20)\n") is None


def test_the_numpy_1_names_paddles_tests_call_are_there():
    r = _run("import paddle, numpy as np\n"
             "assert np.product([2, 3]) == 6 and np.asscalar(np.array([4.0])) == 4.0\n"
             "assert np.int is int and np.alltrue([True])\n")
    assert r.returncode == 0, r.stderr


def test_the_runner_reads_pytests_summary_even_with_output_after_it():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "conformance_run", os.path.join(ROOT, "scripts", "conformance", "run.py"))
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    out = ("....\n4 passed, 2 warnings in 3.10s\ngc: collectable <list 0x7f>\n"
           "gc: collectable <dict 0x7f>\n")
    assert run.summary_of(out) == (4, 0, 0, 0)
    assert run.summary_of("F.\n1 failed, 1 passed in 0.5s\n") == (1, 1, 0, 0)


@pytest.fixture
def download_shim(tmp_path, monkeypatch):
    """The shim's paddle.dataset.common with DATA_HOME in tmp_path (imported in-process)."""
    sys.path.insert(0, SHIM)
    try:
        common = importlib.import_module("paddle.dataset.common")
        synth = importlib.import_module("paddle.dataset._synth_files")
        monkeypatch.setattr(common, "DATA_HOME", str(tmp_path))
        yield common, synth
    finally:
        sys.path.remove(SHIM)
        for name in [m for m in sys.modules if m == "paddle" or m.startswith("paddle.")]:
            del sys.modules[name]


def _ints(text):
    return [int(t) for t in text.split(" ")]


def test_downloaded_files_follow_the_real_files_formats(download_shim, tmp_path):
    """Each synthetic file, parsed by the rules of its format (see _synth_files), has what
    the dist tests read from it: ids inside the embedding sizes, enough samples."""
    import tarfile
    common, synth = download_shim
    # avazu_ctr_data.tgz: meta gives the dims; every line `dnn ids\tlr id:value\tclick`
    path = common.download(synth.AVAZU_URL, "avazu_ctr_data", "c11df99fbd14e53cd4bfa6567344b26e")
    assert path == str(tmp_path / "avazu_ctr_data" / "avazu_ctr_data.tgz")
    with tarfile.open(path, "r:gz") as tar:
        files = {m.name: tar.extractfile(m).read().decode() for m in tar if m.isfile()}
    assert set(files) == {f"avazu_ctr_data/{n}.txt" for n in ("train", "test", "infer",
                                                             "data.meta")}
    meta = files["avazu_ctr_data/data.meta.txt"].splitlines()
    assert meta[0].startswith("dnn_input_dim:") and meta[1].startswith("lr_input_dim:")
    dnn_dim, lr_dim = (int(line.split(":")[1]) for line in meta)
    train = files["avazu_ctr_data/train.txt"].splitlines()
    assert len(train) >= 5 * 128  # the fleet ctr tests read it in batches of 128
    clicks = set()
    for line in train:
        dnn, lr, click = line.split("\t")
        assert all(0 <= i < dnn_dim for i in _ints(dnn))
        lr_pairs = [p.split(":") for p in lr.split(" ")]
        assert all(len(p) == 2 and 0 <= int(p[0]) < lr_dim and float(p[1]) for p in lr_pairs)
        clicks.add(int(click))
    assert clicks == {0, 1}

    # simnet.train.1000 saved as "train": `qid;n_pos n_neg;query;pos titles...;neg titles...;`
    path = common.download(synth.SIMNET_URL, "simnet", "24e49366eb0611c552667989de2f57d5",
                           "train")
    assert path == str(tmp_path / "simnet" / "train")
    pairs = 0
    for line in open(path).read().splitlines():
        assert line.endswith(";")
        fields = [_ints(f) for f in line.split(";")[:-1]]
        n_pos, n_neg = fields[1]
        assert n_pos >= 1 and n_neg >= 1 and len(fields) == 3 + n_pos + n_neg
        assert all(0 <= i < 1500 for f in fields[2:] for i in f)  # dist_simnet_bow's dict_dim
        pairs += n_neg
    assert pairs >= 2 * 5 * 2  # two trainers, five batches of two

    # imdb.vocab: a word a line; text_classification.tar.gz: {train,test}/{pos,neg}/*.txt
    vocab = open(common.download(synth.IMDB_VOCAB_URL, "text_classification", "x")).read()
    words = vocab.split("\n")[:-1]
    assert len(set(words)) == len(words) and all(w.isalpha() and w.islower() for w in words)
    path = common.download(synth.TEXT_CLASSIFICATION_URL, "text_classification", "x")
    docs = {}
    with tarfile.open(path) as tar:
        for m in tar:
            if m.isfile():
                assert re.match(r"(train|test)/(pos|neg)/\d+_\d+\.txt$", m.name), m.name
                text = tar.extractfile(m).read().decode()
                tokens = text.translate(str.maketrans("", "", string.punctuation)).lower()
                assert set(tokens.split()) <= set(words)
                docs.setdefault(os.path.dirname(m.name), []).append(tokens)
    assert {k: len(v) >= 10 for k, v in docs.items()} == {
        f"{s}/{c}": True for s in ("train", "test") for c in ("pos", "neg")}


def test_download_is_deterministic_offline_and_refuses_unknown_urls(download_shim, tmp_path):
    common, synth = download_shim
    path = common.download(synth.SIMNET_URL, "simnet", "0" * 32)
    digest = common.md5file(path)
    with open(path, "r+b") as f:  # a truncated or foreign file is replaced, not trusted
        f.truncate(100)
    assert common.download(synth.SIMNET_URL, "simnet", "0" * 32) == path
    assert common.md5file(path) == digest
    assert sorted(os.listdir(tmp_path / "simnet")) == ["simnet.train.1000"]  # no temp left
    r = _run("import paddle.dataset.common as c, paddle.dataset._synth_files as s\n"
             f"c.DATA_HOME = {str(tmp_path / 'other')!r}\n"
             "print(c.md5file(c.download(s.SIMNET_URL, 'simnet', '')))\n")
    assert r.returncode == 0 and r.stdout.strip() == digest, r.stderr  # the same in a new process
    with pytest.raises(RuntimeError, match="no network"):
        common.download("http://example.com/real.tgz", "real", "0" * 32)
    assert not (tmp_path / "real").exists()

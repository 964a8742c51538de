"""The conformance run's `paddle` shim: Paddle's module names resolve to Fluidity's, and the
synthetic data sets have the real ones' sample structure (scripts/conformance)."""
import importlib
import importlib.util
import os
import subprocess
import sys

import numpy as np

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

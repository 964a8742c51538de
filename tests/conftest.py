"""tests/ mirrors the package (tests/ops for fluidity/ops, ...). The helpers shared by test
modules in several folders (op_test, paths) live here, on sys.path."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


# --- the slow tier ---------------------------------------------------------------------------
# `make test` (CI: 2 cores, under 8 minutes) leaves these out with `-m "not slow"`;
# `make test-all` runs them too. Each is an end-to-end variant of a case the fast tier keeps
# (the first model of a zoo, one training run of a kind): the rest of the zoo standalone and
# compiled, the examples compiled, the emulated-CUDA trainings, nvcc builds, Ray jobs, the
# kill-during-save kinds. Node-id regexes, matched from the start of the id.
SLOW = [
    r"tests/codegen/test_standalone\.py::test_every_paddle_zoo_model_runs_standalone_with_"
    r"paddles_outputs\[(?!mlp\]|3/zero_d_loss\])",
    r"tests/codegen/test_models\.py::test_a_paddle_model_runs_compiled_with_paddles_outputs"
    r"\[(?!2/ctr_dnn\]|3/text_cls\])",
    r"tests/codegen/test_examples_compiled\.py::.*\[(?!digits mlp\])",
    r"tests/codegen/test_cuda_nvcc\.py::test_a_models_training_step_compiles_for_sm90",
    r"tests/executor/test_cuda_executor\.py::test_training_on_the_emulated_device_matches_the_"
    r"cpu\[(?!mlp-adam\])",
    r"tests/distributed/test_ray_launch\.py::",
    r"tests/io/test_io_kill\.py::test_kill_during_save_leaves_old_or_new\[(?!separate\])",
]
_SLOW = [__import__("re").compile(p) for p in SLOW]


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: left out of `make test` (see tests/conftest.py)")


def pytest_collection_modifyitems(config, items):
    import pytest
    for item in items:
        if any(p.match(item.nodeid) for p in _SLOW):
            item.add_marker(pytest.mark.slow)

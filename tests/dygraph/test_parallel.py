"""fluid.dygraph.parallel as Fluid 1.8 lays it out: ParallelEnv reads the launcher's
variables; DataParallel, which is not built, imports and then raises NotImplementedError
saying so."""
import pytest

import fluidity as fluid
from fluidity.dygraph.parallel import DataParallel, Env, ParallelEnv, prepare_context


def test_parallel_env_reads_the_launchers_variables(monkeypatch):
    env = ParallelEnv()
    assert (env.nranks, env.local_rank, env.dev_id) == (1, 0, 0)
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "4")
    monkeypatch.setenv("PADDLE_TRAINER_ID", "2")
    monkeypatch.setenv("FLAGS_selected_gpus", "3")
    monkeypatch.setenv("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:6170,127.0.0.1:6171")
    monkeypatch.setenv("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:6171")
    env = Env()
    assert (env.nranks, env.local_rank, env.dev_id) == (4, 2, 3)
    assert env.trainer_endpoints == ["127.0.0.1:6170", "127.0.0.1:6171"]
    assert env.current_endpoint == "127.0.0.1:6171"
    assert fluid.dygraph.ParallelEnv is ParallelEnv


@pytest.mark.parametrize("make", [lambda: DataParallel(None, None), prepare_context])
def test_dygraph_framework_names_say_they_are_not_built(make):
    with pytest.raises(NotImplementedError, match="not built"):
        make()

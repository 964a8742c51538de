"""The fixture shared by the save/load tests of tests/io."""
import pytest

import fluidity as fluid
from io_models import adam_mlp


@pytest.fixture
def model():
    """(exe, main, startup, y) of adam_mlp(), its startup run in a fresh global scope."""
    main, startup, x, y, loss = adam_mlp()
    with fluid.scope_guard(fluid.Scope()):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        yield exe, main, startup, y

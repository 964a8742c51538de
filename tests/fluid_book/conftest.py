"""Book chapters as Fluid 1.x users wrote them. Each test builds into fresh default programs
and a fresh global scope, so chapters never see each other's parameters."""
import random

import pytest

import fluidity as fluid


@pytest.fixture(autouse=True)
def fresh_programs():
    random.seed(0)     # fluidity.reader.shuffle draws from `random`, as paddle.reader's
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 90
    with fluid.scope_guard(fluid.Scope()), fluid.program_guard(main, startup), \
            fluid.unique_name.guard():
        yield

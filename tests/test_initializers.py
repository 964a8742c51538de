"""Initializers: ops in the startup program, their distributions, and seeding."""
import math

import numpy as np
import pytest

import fluidity as fluid
from fluidity import initializer as I
from fluidity.errors import ShapeError


def _init(init, shape=(200, 300), seed=0, dtype="float32"):
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = seed
    with fluid.program_guard(main, startup):
        p = main.global_block().create_parameter("p", list(shape), dtype)
        init(p, startup.global_block())
    s = fluid.Scope()
    fluid.Executor().run(startup, scope=s)
    return np.asarray(s.find_var("p").get_tensor()).copy(), startup


def test_constant():
    v, startup = _init(I.Constant(0.25), (3, 4))
    np.testing.assert_array_equal(v, np.full((3, 4), 0.25, "float32"))
    assert [op.type for op in startup.global_block().ops] == ["fill_constant"]


def test_uniform_and_normal_statistics():
    u, s1 = _init(I.Uniform(-0.5, 1.5, seed=3))
    assert u.min() >= -0.5 and u.max() < 1.5 and abs(u.mean() - 0.5) < 0.02
    assert abs(u.var() - 4 / 12) < 0.02
    n, s2 = _init(I.Normal(1.0, 2.0, seed=3))
    assert abs(n.mean() - 1.0) < 0.03 and abs(n.std() - 2.0) < 0.03
    t, _ = _init(I.TruncatedNormal(0.0, 1.0, seed=3))
    assert np.abs(t).max() <= 2.0 and 0.8 < t.std() < 0.9  # truncation at 2 std: 0.88
    assert s1.global_block().ops[0].type == "uniform_random"
    assert s2.global_block().ops[0].type == "gaussian_random"


@pytest.mark.parametrize("uniform", [True, False])
def test_xavier_and_msra_scales(uniform):
    fan_in, fan_out = 200, 300
    x, _ = _init(I.Xavier(uniform=uniform, seed=1), (fan_in, fan_out))
    want = math.sqrt(2.0 / (fan_in + fan_out))  # std of both Glorot forms
    assert abs(x.std() - want) / want < 0.03
    m, _ = _init(I.MSRA(uniform=uniform, seed=1), (fan_in, fan_out))
    want = math.sqrt(2.0 / fan_in)
    assert abs(m.std() - want) / want < 0.03
    # conv filters: fan_in = in_channels * kh * kw
    c, _ = _init(I.MSRA(uniform=uniform, seed=1), (64, 16, 3, 3))
    want = math.sqrt(2.0 / (16 * 9))
    assert abs(c.std() - want) / want < 0.05


def test_numpy_array_initializer():
    w = np.arange(6, dtype="float32").reshape(2, 3)
    v, startup = _init(I.NumpyArrayInitializer(w), (2, 3))
    np.testing.assert_array_equal(v, w)
    assert startup.global_block().ops[0].type == "assign_value"
    with pytest.raises(ShapeError, match="array shape \\[2, 3\\] != parameter shape \\[3, 2\\]"):
        _init(I.NumpyArrayInitializer(w), (3, 2))


def test_program_seed_makes_initializers_reproducible():
    a, _ = _init(I.Xavier(), seed=11)
    b, _ = _init(I.Xavier(), seed=11)
    c, _ = _init(I.Xavier(), seed=12)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # an explicit seed wins over the program's
    d, _ = _init(I.Normal(seed=5), seed=11)
    e, _ = _init(I.Normal(seed=5), seed=99)
    np.testing.assert_array_equal(d, e)


def test_seeded_program_gives_every_init_op_its_seed():
    """Fluid 1.8: an initializer without a seed takes the program's random_seed; a seed of
    its own wins; a program without one leaves 0 (a fresh draw per run)."""
    for seed in (0, 123):
        main, startup = fluid.Program(), fluid.Program()
        startup.random_seed = seed
        with fluid.program_guard(main, startup):
            x = fluid.layers.data("x", [6], dtype="float32")
            fluid.layers.fc(x, 4, param_attr=fluid.ParamAttr(initializer=I.Uniform()))
            fluid.layers.fc(x, 4, param_attr=fluid.ParamAttr(initializer=I.Normal(seed=456)))
            fluid.layers.fc(x, 4)   # Xavier
        seeds = {op.type: op.attr("seed") for op in startup.global_block().ops
                 if op.has_attr("seed") and op.attr("seed") != 456}
        assert seeds and set(seeds.values()) == {seed}, seeds
        assert sum(op.attr("seed") == 456 for op in startup.global_block().ops
                   if op.has_attr("seed")) == 1


def test_seeded_program_starts_same_shaped_parameters_equal_as_fluid():
    """Each init op reseeds its engine with the program's seed, so in a seeded program two
    fc layers of one shape start out equal (Fluid 1.8's behaviour, which its programs rely
    on); without a seed they differ."""
    for seed, equal in ((7, True), (0, False)):
        main, startup = fluid.Program(), fluid.Program()
        startup.random_seed = seed
        with fluid.program_guard(main, startup):
            x = fluid.layers.data("x", [5], dtype="float32")
            a = fluid.layers.fc(x, 3)
            b = fluid.layers.fc(x, 3)
        s = fluid.Scope()
        exe = fluid.Executor()
        exe.run(startup, scope=s)
        wa, wb = (np.asarray(s.find_var(p.name).get_tensor())
                  for p in main.global_block().all_parameters() if p.name.endswith("w_0"))
        assert np.array_equal(wa, wb) == equal
        out = exe.run(main, feed={"x": np.ones((2, 5), "float32")}, fetch_list=[a, b],
                      scope=s)
        assert np.array_equal(out[0], out[1]) == equal


def test_initializer_keeps_the_first_programs_seed():
    init = I.Uniform()
    _, s1 = _init(init, (2, 2), seed=31)
    _, s2 = _init(init, (2, 2), seed=32)
    assert s2.global_block().ops[0].attr("seed") == 31

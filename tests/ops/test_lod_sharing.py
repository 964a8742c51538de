"""Each op whose LoD rule was aligned with Fluid 1.8's InferShape (`ctx->ShareLoD`), fed a
LoD input: the fetched LoD and the declared lod_level are Fluid's. Where Fluid shares a LoD
onto an output of other rows (a slice or split along dim 0, a gather), the output gets none:
a LoD that counts rows the tensor lacks is worse than no LoD."""
import numpy as np
import pytest

import fluidity as fluid

L = fluid.layers
LENS = [[2, 3]]            # 5 rows in two sequences


def _f(*shape):
    return np.arange(int(np.prod(shape)), dtype="float32").reshape(shape) / 10


# name: (x's shape, build(x) -> outputs, per output: True when it keeps X's LoD, "rows" when
# Fluid shares it but the output has other rows (declared, dropped at run time), False when
# Fluid never shares it)
CASES = {
    "matmul": ([5, 4], lambda x: [L.matmul(x, L.assign(_f(4, 3)))], [True]),
    "conv2d": ([5, 1, 4, 4], lambda x: [L.conv2d(x, 2, 3, padding=1)], [True]),
    "pool3d": ([5, 1, 2, 4, 4], lambda x: [L.pool3d(x, 2, pool_stride=2)], [True]),
    "slice_cols": ([5, 4], lambda x: [L.slice(x, axes=[1], starts=[0], ends=[2])], [True]),
    "slice_rows": ([5, 4], lambda x: [L.slice(x, axes=[0], starts=[0], ends=[3])], ["rows"]),
    "strided_slice": ([5, 4], lambda x: [L.strided_slice(x, [1], [0], [4], [2])], [True]),
    "split_cols": ([5, 4], lambda x: L.split(x, 2, dim=1), [True, True]),
    "split_rows": ([5, 4], lambda x: L.split(x, [2, 3], dim=0), ["rows", "rows"]),
    "argsort": ([5, 4], lambda x: list(L.argsort(x, axis=1)), [True, True]),
    "cumsum": ([5, 4], lambda x: [L.cumsum(x, axis=1)], [True]),
    "pad_cols": ([5, 4], lambda x: [L.pad(x, [0, 0, 1, 1])], [True]),
    "pad_rows": ([5, 4], lambda x: [L.pad(x, [1, 0, 0, 0])], ["rows"]),
    "index_select": ([5, 4], lambda x: _op("index_select", {
        "X": x, "Index": L.assign(np.array([3, 0], "int64"))}, ["Out"], dim=1), [True]),
    "gather_nd": ([5, 4], lambda x: [L.gather_nd(x, L.assign(np.array([[4], [0]], "int32")))],
                  ["rows"]),
    "squared_l2_distance": ([5, 4], lambda x: _op("squared_l2_distance", {
        "X": x, "Y": L.assign(_f(1, 4))}, ["sub_result", "Out"])[1:], [True]),
    "scatter": ([5, 4], lambda x: [L.scatter(x, L.assign(np.array([1], "int64")),
                                             L.assign(_f(1, 4)))], [False]),
    "reverse": ([5, 4], lambda x: [L.reverse(x, axis=1)], [False]),
    "smooth_l1": ([5, 4], lambda x: [L.smooth_l1(x, L.assign(_f(5, 4)))], [False]),
    "norm": ([5, 4], lambda x: [L.l2_normalize(x, axis=1)], [False]),
    "transpose2": ([5, 2, 2], lambda x: [L.transpose(x, [0, 2, 1])], [False]),
    "shuffle_channel": ([5, 4, 1, 1], lambda x: [L.shuffle_channel(x, 2)], [False]),
    "stack_axis1": ([5, 4], lambda x: [L.stack([x, x], axis=1)], [True]),
    "stack_axis0": ([5, 4], lambda x: [L.stack([x, x], axis=0)], ["rows"]),
    "hsigmoid": ([5, 4], lambda x: [L.hsigmoid(x, L.assign(np.zeros((5, 1), "int64")), 4)],
                 [True]),
    "cos_sim": ([5, 4], lambda x: [L.cos_sim(x, L.assign(_f(5, 4)))], [True]),
    "clip_by_norm": ([5, 4], lambda x: [L.clip_by_norm(x, 1.0)], [True]),
    "center_loss": ([5, 4], lambda x: [L.center_loss(x, L.assign(np.zeros((5, 1), "int64")),
                                                     3, 0.1)], [True]),
    "bpr_loss": ([5, 4], lambda x: [L.bpr_loss(L.softmax(x),
                                               L.assign(np.zeros((5, 1), "int64")))], [True]),
    "teacher_student_sigmoid_loss": ([5, 1], lambda x: [L.teacher_student_sigmoid_loss(
        x, L.assign(_f(5, 1)))], [True]),
}


def _op(op_type, inputs, out_slots, **attrs):
    """Append `op_type` with fresh float outputs (one per slot); the output variables."""
    block = fluid.default_main_program().current_block()
    outs = [block.create_var(name=f"{op_type}.{s}", dtype="float32") for s in out_slots]
    block.append_op(type=op_type, inputs=inputs,
                    outputs={s: v for s, v in zip(out_slots, outs)}, attrs=attrs)
    return outs


def _run(shape, build, program_of=lambda main: main, strategy=None):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None] + shape[1:], "float32", lod_level=1)
        outs = build(x)
    t = fluid.create_lod_tensor(_f(*shape), LENS, fluid.CPUPlace())
    exe = fluid.Executor(fluid.CPUPlace(), **({"strategy": strategy} if strategy else {}))
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    got = exe.run(program_of(main), feed={"x": t}, fetch_list=outs, return_numpy=False,
                  scope=scope)
    return outs, got


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_output_keeps_the_lod_exactly_where_fluid_shares_it(name):
    shape, build, keeps = CASES[name]
    outs, got = _run(shape, build)
    # at build time Fluid's ShareLoD declares X's level whatever the rows turn out to be
    assert [o.lod_level for o in outs] == [1 if k else 0 for k in keeps]
    for out, kept in zip(got, keeps):
        assert out.recursive_sequence_lengths() == (LENS if kept is True else [])


def test_a_dropped_lod_is_declared_at_build_time_as_none():
    """An op that Fluid gives no ShareLoD declares lod_level 0 even over a LoD input."""
    for name in ("scatter", "reverse", "smooth_l1", "norm", "transpose2", "shuffle_channel"):
        shape, build, _keeps = CASES[name]
        main = fluid.Program()
        with fluid.program_guard(main, fluid.Program()):
            outs = build(fluid.data("x", [None] + shape[1:], "float32", lod_level=1))
        assert [o.lod_level for o in outs] == [0], name


@pytest.mark.parametrize("name", ["matmul", "slice_cols", "slice_rows", "cumsum", "transpose2"])
def test_the_compiled_program_gives_the_interpreters_lod(name):
    """A sequence_pool after the op reads the LoD the op passed on: the same numbers
    interpreted and compiled (and, where the op drops the LoD, both refuse to pool)."""
    shape, build, keeps = CASES[name]

    def pooled(x):
        return [L.sequence_pool(build(x)[0], "sum")]

    if keeps[0] is not True:
        for prog in (lambda m: m, lambda m: fluid.CompiledProgram(m).with_native_code()):
            with pytest.raises(Exception):
                _run(shape, pooled, prog)
        return
    _, (want,) = _run(shape, pooled)
    _, (got,) = _run(shape, pooled, lambda m: fluid.CompiledProgram(m).with_native_code())
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    _, (plain,) = _run(shape, build, lambda m: fluid.CompiledProgram(m).with_native_code())
    assert plain.recursive_sequence_lengths() == LENS


@pytest.mark.parametrize("name", ["matmul", "slice_rows", "pad_rows", "stack_axis1", "conv2d"])
def test_the_linear_executor_gives_the_interpreters_lod(name):
    shape, build, keeps = CASES[name]
    _, got = _run(shape, build, strategy="linear")
    assert [g.recursive_sequence_lengths() for g in got] == \
        [LENS if k is True else [] for k in keeps]

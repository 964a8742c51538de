"""Every op with a CUDA form, its generated kernels vs the numpy kernels, on the host
emulation of the device (FLUIDITY_CUDA_EMULATE: the same .cu, built by g++ against
runtime/cuda_host.h). The samples are the C++ target's (codegen_samples*.py); the sample ops
of a group share one program (forward, then the backward of a weighted sum of their outputs)
so that a group is one build. A sample whose form has no CUDA emitter (other attributes,
another dtype) is left out by name, and the last test checks that every op with a CUDA form
ran in some group."""
import numpy as np
import pytest
from codegen_samples import SEQUENCE_POOLS, adam_extra, all_samples, f32, lookup, seq_pool

import fluidity as fluid
from fluidity.backward import gradients
from fluidity.codegen import cuda, emit
from fluidity.core.tensor import LoDTensor, SelectedRows
from fluidity.errors import DeviceError
from fluidity.ops import registry

SAMPLES, EXTRA, _ = all_samples()
UPDATES = {"sgd", "adam", "momentum", "adagrad"}
N_GROUPS = 4
RTOL, ATOL = 1e-5, 1e-6
UPDATE_CASES = [("sgd", {}, False), ("sgd", {}, True), ("adam", {}, False),
                ("adam", {"lazy_mode": True}, True), ("adam", {"lazy_mode": False}, True),
                ("adam", {"use_global_beta_pow": False}, False),   # Paddle 2.1+'s epsilon
                ("adam", {"lazy_mode": True, "use_global_beta_pow": False}, True)]


@pytest.fixture(autouse=True)
def emulated(monkeypatch):
    monkeypatch.setenv(cuda.EMULATE_ENV, "1")


def _cuda_ops():
    return emit.op_types("cuda")


def _forward_of(op_type):
    if op_type == "cross_entropy_grad2":
        return "cross_entropy2"
    return op_type[:-len("_grad")] if op_type.endswith("_grad") else op_type


_drawn = []


def _cases():
    """(case name, op type, (inputs, attrs, wrt[, outputs])) of every sample whose op has a
    CUDA form, drawn once per process."""
    if not _drawn:
        for case in sorted(SAMPLES) + sorted(EXTRA):
            op_type, sample = EXTRA.get(case, (case, SAMPLES.get(case)))
            if op_type in UPDATES or emit.lookup(op_type, "cuda") is None:
                continue
            _drawn.append((case, op_type, sample()))
    return _drawn


def _add(block, case, op_type, inputs, attrs, outputs, feed):
    """Append one sample op with its own variable names; (its float outputs, {slot: input
    vars})."""
    opdef = registry.get(op_type)
    tag = case.replace("/", "_")
    in_vars = {}
    for slot, value in inputs.items():
        if value is None:
            continue
        items = value if isinstance(value, list) else [(slot.lower(), value)]
        vs = []
        for name, v in items:
            arr = v._array if isinstance(v, LoDTensor) else np.asarray(v)
            lod = v._lod if isinstance(v, LoDTensor) else []
            var = block.create_var(name=f"{tag}.{name}", shape=arr.shape, dtype=arr.dtype,
                                   lod_level=len(lod), stop_gradient=False)
            feed[var.name] = v if isinstance(v, LoDTensor) else arr
            vs.append(var)
        in_vars[slot] = vs
    if outputs is None:
        outputs = [s.name for s in opdef.outputs]
    out_vars = {s.name: [block.create_var(name=f"{tag}.{s.name.lower()}_out")]
                for s in opdef.outputs if s.name in outputs}
    block.append_op(op_type, inputs=in_vars, outputs=out_vars, attrs=attrs or {})
    shown = [v for s in opdef.outputs if s.name in out_vars and not s.intermediate
             for v in out_vars[s.name]]
    return shown, in_vars


def _program(cases, rng):
    """(program, feed, fetch list) of the cases' ops, and the backward of sum_k mean(out_k *
    w_k) over the float outputs, for the inputs each sample names as `wrt`."""
    main, startup = fluid.Program(), fluid.Program()
    feed, outs, targets = {}, [], _Targets()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        loose = set()
        for case, op_type, (inputs, attrs, wrt, *outputs) in cases:
            shown, in_vars = _add(block, case, op_type, inputs, attrs,
                                  (outputs or [None])[0], feed)
            outs += [v for v in shown]
            if not wrt:                   # no gradient checked: kept out of the loss
                loose.update(v.name for v in shown)
            for w in wrt or ():
                targets.append(in_vars[w][0] if isinstance(w, str) else in_vars[w[0]][w[1]])
    targets.loose = loose
    return main, startup, feed, outs, targets


class _Targets(list):
    """The inputs whose gradients are checked; `.loose`: outputs left out of the loss."""
    loose = ()


def _with_grads(main, startup, feed, outs, targets, float_outs, rng):
    with fluid.program_guard(main, startup):
        block = main.global_block()
        terms = []
        for i, (v, shape) in enumerate(float_outs):
            if v.name in targets.loose:
                continue
            if not shape:                 # a 0-D output: its mean is itself
                s = block.create_var(name=f"gs{i}", dtype="float32")
                block.append_op("mean", {"X": v}, {"Out": s})
                terms.append(s)
                continue
            w = rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
            wv = block.create_var(name=f"gw{i}", shape=w.shape, dtype="float32")
            feed[wv.name] = w
            p = block.create_var(name=f"gp{i}", dtype="float32")
            block.append_op("elementwise_mul", {"X": v, "Y": wv}, {"Out": p})
            s = block.create_var(name=f"gs{i}", dtype="float32")
            block.append_op("mean", {"X": p}, {"Out": s})
            terms.append(s)
        loss = block.create_var(name="g_loss", dtype="float32", shape=[1])
        block.append_op("sum", {"X": terms}, {"Out": loss})
        grads = [g for g in gradients([loss], targets) if g is not None]
    return grads


def _run(main, feed, fetch, place):
    return fluid.Executor(place).run(main, feed=feed, fetch_list=fetch, scope=fluid.Scope(),
                                     return_numpy=False)


def _arr(v):
    return np.asarray(v._array if isinstance(v, LoDTensor) else
                      (v.value if isinstance(v, SelectedRows) else v))


def _lowers(case):
    """(None or why not, op types) of one case's program (forward and backward) lowered
    for the device."""
    why, types = _lowers_as_is(case)
    if why is not None and case[2][2]:        # the forward alone, if its gradient has none
        return _lowers_as_is(_forward_only(case))
    return why, types


def _forward_only(case):
    name, op_type, (inputs, attrs, wrt, *outputs) = case
    return name, op_type, (inputs, attrs, None, *outputs)


def _usable(case):
    """The case as the device runs it (without its gradient where that has no CUDA form),
    or None."""
    if _lowers_as_is(case)[0] is None:
        return case
    if case[2][2] and _lowers_as_is(_forward_only(case))[0] is None:
        return _forward_only(case)
    return None


def _lowers_as_is(case):
    rng = np.random.default_rng(1)
    main, startup, feed, outs, targets = _program([case], rng)
    try:
        want = _run(main, feed, outs, fluid.CPUPlace())
        floats = [(v, _arr(o).shape) for v, o in zip(outs, want)
                  if _arr(o).dtype == np.float32 and _arr(o).size]
        fetch = outs + (_with_grads(main, startup, feed, outs, targets, floats, rng)
                        if floats and targets else [])
        cuda.lower(main, 0, keep=[getattr(v, "name", v) for v in fetch])
    except DeviceError as e:
        return str(e), set()
    return None, {op.type for op in main.global_block().ops}


def _groups():
    cases = _cases()
    return [cases[k::N_GROUPS] for k in range(N_GROUPS)]


@pytest.mark.parametrize("group", range(N_GROUPS))
def test_cuda_kernels_match_the_numpy_kernels(group):
    cases = [c for c in map(_usable, _groups()[group]) if c is not None]
    assert cases, "no sample of this group has a CUDA form"
    _check(cases, group)


def test_every_sequence_pool_type_and_lookup_gradient_on_the_device():
    """All pool types (empty sequences included) and lookup_table's sparse and dense
    gradients, in one program."""
    cases = [(f"pool_{p}", "sequence_pool", seq_pool(p)()) for p in SEQUENCE_POOLS]
    for sparse in (False, True):
        inputs, attrs, wrt = lookup()
        cases.append((f"lookup_{sparse}", "lookup_table",
                      (inputs, {**attrs, "is_sparse": sparse}, wrt)))
    usable = [_usable(c) for c in cases]
    assert all(c is not None and c[2][2] for c in usable), [_lowers(c)[0] for c in cases]
    _check(usable, 7)


def _check(cases, seed):
    """The cases' program (forward and gradients) on the emulated device vs the CPU."""
    rng = np.random.default_rng(seed)
    main, startup, feed, outs, targets = _program(cases, rng)
    want_fwd = _run(main, feed, outs, fluid.CPUPlace())
    floats = [(v, _arr(o).shape) for v, o in zip(outs, want_fwd)
              if _arr(o).dtype == np.float32 and _arr(o).size]
    grads = _with_grads(main, startup, feed, outs, targets, floats, rng) if floats else []
    fetch = outs + grads
    want = _run(main, feed, fetch, fluid.CPUPlace())
    got = _run(main, feed, fetch, fluid.CUDAPlace(0))
    for v, g, w in zip(fetch, got, want):
        name = getattr(v, "name", v)
        g, w = _arr(g), _arr(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{name}: {g.shape} vs {w.shape}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=name)
        else:
            np.testing.assert_array_equal(g, w, err_msg=name)


def _update_run(op_type, values, attrs, grad, place):
    opdef = registry.get(op_type)
    main = fluid.Program()
    block = main.global_block()
    for n, v in values.items():
        block.create_var(name=n, shape=v.shape, dtype=v.dtype, persistable=True)
    sparse = isinstance(grad, SelectedRows)
    g = block.create_var(name="Grad", shape=values["Param"].shape, dtype="float32",
                         persistable=True, type=fluid.core.VarType.SELECTED_ROWS if sparse
                         else fluid.core.VarType.LOD_TENSOR)
    outs = {o: [src] for o, src in opdef.out_of.items() if src in values}
    block.append_op(op_type, {**{k: [k] for k in values}, "Grad": [g]}, outs, attrs)
    scope = fluid.Scope()
    for n, v in values.items():
        scope.var(n).get_tensor().set(v)
    scope.var("Grad").value = grad if sparse else LoDTensor(grad)
    fluid.Executor(place).run(main, scope=scope)
    return {n: np.array(scope.find_var(n).get_tensor()) for n in values}


@pytest.mark.parametrize("op_type,attrs,sparse", UPDATE_CASES)
def test_cuda_updates_match_the_numpy_kernels(op_type, attrs, sparse):
    """Dense and SelectedRows gradients (duplicate rows) updating persistables in place on
    the device, read back through the scope."""
    h, d = 6, 3
    values = {"Param": f32(h, d), "LearningRate": np.array([0.1], np.float32)}
    if op_type == "adam":
        values.update({"Moment1": f32(h, d, lo=0.0, hi=1.0),
                       "Moment2": f32(h, d, lo=0.0, hi=1.0), **adam_extra()})
    rows = np.array([4, 1, 4, 0, 4], np.int64)
    grad = SelectedRows(rows, h, f32(len(rows), d)) if sparse else f32(h, d)
    want = _update_run(op_type, values, attrs, grad, fluid.CPUPlace())
    got = _update_run(op_type, values, attrs, grad, fluid.CUDAPlace(0))
    for n in values:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-6, atol=1e-7, err_msg=n)


def test_every_op_with_a_cuda_form_is_run_by_a_group():
    """The ops the groups above run on the device (their samples that lower), with the
    update tests', cover every op with a CUDA form."""
    covered = {t for t, _, _ in UPDATE_CASES}
    for case in _cases():
        covered |= _lowers(case)[1]
    missing = [t for t in _cuda_ops() if t not in covered]
    assert missing == [], f"ops with a CUDA form that no test runs on the device: {missing}"

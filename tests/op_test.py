"""Test harness for ops: run one op on numpy inputs, compare with a numpy reference, and check
its appended backward against numeric (central finite-difference) gradients.

    out = run_op("scale", {"X": x}, {"scale": 2.0})            # {"Out": array}
    check_output("scale", {"X": x}, {"Out": 2 * x}, {"scale": 2.0})
    check_grad("elementwise_mul", {"X": x, "Y": y}, wrt=["X", "Y"])

Inputs are arrays, LoDTensors (for LoD), or lists of (name, array) for duplicable slots.
Gradient checks run in float64 so that finite differences are accurate; the loss is
sum_k mean(out_k * R_k) with fixed random R_k, so no gradient cancels by symmetry.

Every op with a compiled form (fluidity/codegen) is also run compiled, wherever these
helpers run it: `run_op` compares the compiled outputs with the interpreter's (the numpy
kernels), and `check_grad` compares the compiled gradients (float32) with the interpreted
ones. `compiled_checked` records which op types a compiled check covered.
"""
import numpy as np

import fluidity as fluid
from fluidity.backward import gradients
from fluidity.core.tensor import LoDTensor
from fluidity.codegen import emit
from fluidity.ops import random_stream, registry

compiled_checked = set()     # op types some compiled run of this process covered
COMPILED_RTOL = 1e-5         # compiled vs numpy kernels: exp/log/tanh, BLAS blocking and
COMPILED_ATOL = 1e-6         # summation order may round differently; arithmetic is exact


def _as_items(slot, value):
    if isinstance(value, list):
        return [(n, v) for n, v in value], True
    return [(slot.lower() + "_in", value)], False


def _array(v):
    return v._array if isinstance(v, LoDTensor) else np.asarray(v)


def build_op(op_type, inputs, attrs=None, outputs=None, dtype_cast=None):
    """Program with one op. Returns (main, startup, feed dict, {slot: [out vars]},
    {slot: [in vars]})."""
    opdef = registry.get(op_type)
    main, startup = fluid.Program(), fluid.Program()
    feed, in_vars = {}, {}
    with fluid.program_guard(main, startup):
        block = main.global_block()
        for slot, value in inputs.items():
            if value is None:
                continue
            items, dup = _as_items(slot, value)
            vs = []
            for name, v in items:
                arr = _array(v)
                if dtype_cast is not None and arr.dtype.kind == "f":
                    arr = arr.astype(dtype_cast)
                    v = LoDTensor(arr, v._lod) if isinstance(v, LoDTensor) else arr
                lod = v._lod if isinstance(v, LoDTensor) else []
                var = block.create_var(name=name, shape=arr.shape, dtype=arr.dtype,
                                       lod_level=len(lod), stop_gradient=False)
                feed[name] = v if isinstance(v, LoDTensor) else arr
                vs.append(var)
            in_vars[slot] = vs
        out_vars = {}
        if outputs is None:
            outputs = [s.name for s in opdef.outputs]
        if not isinstance(outputs, dict):
            outputs = {name: 1 for name in outputs}
        for s in opdef.outputs:
            if s.name in outputs:
                out_vars[s.name] = [block.create_var(name=f"{s.name.lower()}_out{i}")
                                    for i in range(outputs[s.name])]
        block.append_op(op_type, inputs=in_vars, outputs=out_vars, attrs=attrs or {})
    return main, startup, feed, out_vars, in_vars


def reset_random_states(program, scope, key=1234):
    """Give every random op of block 0 the state [key, 0] in `scope` (what a first run would
    have made with a fresh key), so that two runs from it draw the same numbers."""
    for op in program.global_block().ops:
        name = random_stream.state_var(op)
        if name is not None:
            scope.var(name).get_tensor().set(np.array([key, 0], np.int64), fluid.CPUPlace())


def run_op(op_type, inputs, attrs=None, outputs=None, return_lod=False):
    """Run one op; returns {out slot: array (or list for duplicable)}. A random op draws
    from state [1234, 0] (seed 0) in both the interpreted and the compiled run."""
    main, startup, feed, out_vars, _ = build_op(op_type, inputs, attrs, outputs)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    reset_random_states(main, scope)
    flat = [(slot, v) for slot, vs in out_vars.items() for v in vs]
    res = exe.run(main, feed=feed, fetch_list=[v for _, v in flat], scope=scope,
                  return_numpy=not return_lod)
    compare_compiled(main, feed, [v for _, v in flat], res, scope, op_type)
    out = {}
    for (slot, _), r in zip(flat, res):
        out.setdefault(slot, []).append(r)
    opdef = registry.get(op_type)
    return {k: (v if opdef.slot(k, inputs=False).duplicable else v[0]) for k, v in out.items()}


def compiled_ops(program):
    """The op types of block 0 of `program` that run in a native segment."""
    from fluidity.codegen.lower import Lowering
    if not any(emit.lookup(op.type, "cpu") for op in program.global_block().ops):
        return set()
    return {t for _, t, where, _ in Lowering(program, 0).explain() if where != "python"}


def compare_compiled(main, feed, fetch, want, scope, what):
    """Run `main` compiled (in `scope`, after the interpreter) and assert its fetches match
    `want` (float: within COMPILED_RTOL/ATOL; others exactly); random ops draw from state
    [1234, 0] (reset_random_states), as run_op's interpreted run did. Returns the op types that ran
    compiled (none: nothing to compare)."""
    done = compiled_ops(main)
    if not done:
        return done
    exe = fluid.Executor(fluid.CPUPlace())
    compiled = fluid.CompiledProgram(main).with_native_code()
    reset_random_states(main, scope)
    got = exe.run(compiled, feed=feed, fetch_list=fetch, scope=scope,
                  return_numpy=not any(isinstance(w, LoDTensor) for w in want))
    for v, g, w in zip(fetch, got, want):
        g, w = _array(g), _array(w)
        label = f"{what}: compiled {getattr(v, 'name', v)}"
        assert g.shape == w.shape and g.dtype == w.dtype, \
            f"{label}: {g.dtype}{g.shape}, interpreter {w.dtype}{w.shape}"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=COMPILED_RTOL, atol=COMPILED_ATOL,
                                       err_msg=label)
        else:
            np.testing.assert_array_equal(g, w, err_msg=label)
    compiled_checked.update(done)
    return done


def check_output(op_type, inputs, expected, attrs=None, atol=1e-5, rtol=1e-5, outputs=None):
    got = run_op(op_type, inputs, attrs, outputs or list(expected))
    for slot, want in expected.items():
        g = got[slot]
        if isinstance(want, list):
            assert len(g) == len(want), f"{op_type}.{slot}: {len(g)} outputs, want {len(want)}"
            for a, b in zip(g, want):
                _assert_close(a, b, atol, rtol, f"{op_type}.{slot}")
        else:
            _assert_close(g, want, atol, rtol, f"{op_type}.{slot}")
    return got


def _assert_close(got, want, atol, rtol, what):
    got = _array(got)
    want = np.asarray(want)
    if want.size == 0:        # fetched, an empty tensor is [0] (Fluid 1.8's fetch op)
        want = want.reshape(0)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, atol=atol, rtol=rtol, err_msg=what)


def check_grad(op_type, inputs, wrt, attrs=None, output_slots=None, outputs=None,
               delta=1e-6, rtol=1e-4, atol=1e-6, seed=0):
    """Compare backward's gradients of inputs `wrt` (slot names, or (slot, i) for one var of a
    duplicable slot) with central finite differences. Runs in float64."""
    rng = np.random.default_rng(seed)
    main, startup, feed, out_vars, in_vars = build_op(op_type, inputs, attrs, outputs,
                                                      dtype_cast=np.float64)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    opdef = registry.get(op_type)
    slots = output_slots or [s.name for s in opdef.outputs
                             if s.name in out_vars and not s.intermediate]
    # shapes of outputs, from a forward run
    candidates = [v for s in slots for v in out_vars[s]]
    fwd = exe.run(main, feed=feed, fetch_list=candidates, scope=scope)
    # only float, non-empty outputs enter the loss (not indices, masks or XShape)
    kept = [(v, o) for v, o in zip(candidates, fwd)
            if np.asarray(o).dtype.kind == "f" and np.asarray(o).size > 0]
    weights = [rng.uniform(0.5, 1.5, size=np.shape(o)).astype(np.float64) for _, o in kept]
    with fluid.program_guard(main, startup):
        block = main.global_block()
        terms = []
        for i, ((v, _), w) in enumerate(zip(kept, weights)):
            wv = block.create_var(name=f"gc_w{i}", shape=w.shape, dtype="float64")
            feed[wv.name] = w
            prod = block.create_var(name=f"gc_p{i}", dtype="float64")
            block.append_op("elementwise_mul", {"X": v, "Y": wv}, {"Out": prod})
            s = block.create_var(name=f"gc_s{i}", dtype="float64")
            block.append_op("mean", {"X": prod}, {"Out": s})
            terms.append(s)
        loss = block.create_var(name="gc_loss", dtype="float64", shape=[1])
        block.append_op("sum", {"X": terms}, {"Out": loss})
        targets = []
        for w in wrt:
            slot, idx = (w, 0) if isinstance(w, str) else w
            targets.append(in_vars[slot][idx])
        grads = gradients([loss], targets)
    names = [g.name if g is not None else None for g in grads]
    analytic = exe.run(main, feed=feed, fetch_list=[n for n in names if n], scope=scope)
    analytic = iter(analytic)

    def loss_at(fd):
        return float(np.asarray(exe.run(main, feed=fd, fetch_list=[loss], scope=scope)[0]).sum())

    for t, name in zip(targets, names):
        assert name is not None, f"{op_type}: no gradient for input '{t.name}'"
        a = np.asarray(next(analytic), dtype=np.float64)
        base = feed[t.name]
        base_arr = _array(base).astype(np.float64)
        num = np.zeros_like(base_arr)
        flat = base_arr.reshape(-1)
        for k in range(flat.size):
            orig = flat[k]
            for sign in (1, -1):
                flat[k] = orig + sign * delta
                fd = dict(feed)
                fd[t.name] = LoDTensor(base_arr.copy(), base._lod) if isinstance(
                    base, LoDTensor) else base_arr.copy()
                val = loss_at(fd)
                num.reshape(-1)[k] += sign * val
            flat[k] = orig
        num /= 2 * delta
        np.testing.assert_allclose(a.reshape(num.shape), num, rtol=rtol, atol=atol,
                                   err_msg=f"{op_type}: gradient of '{t.name}'")
    check_compiled_grads(op_type, inputs, wrt, attrs, output_slots, outputs, seed)


def check_compiled_grads(op_type, inputs, wrt, attrs=None, output_slots=None, outputs=None,
                         seed=0):
    """The same gradient program in float32, compiled vs interpreted (when the op or its
    gradient op has a compiled form)."""
    if not any(emit.lookup(t, "cpu")
               for t in (op_type, op_type + "_grad")):
        return set()
    rng = np.random.default_rng(seed)
    main, startup, feed, out_vars, in_vars = build_op(op_type, inputs, attrs, outputs,
                                                      dtype_cast=np.float32)
    opdef = registry.get(op_type)
    slots = output_slots or [s.name for s in opdef.outputs
                             if s.name in out_vars and not s.intermediate]
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    candidates = [v for s in slots for v in out_vars[s]]
    fwd = exe.run(main, feed=feed, fetch_list=candidates, scope=scope)
    kept = [(v, o) for v, o in zip(candidates, fwd)
            if np.asarray(o).dtype == np.float32 and np.asarray(o).size > 0]
    if not kept:
        return set()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        terms = []
        for i, (v, o) in enumerate(kept):
            w = rng.uniform(0.5, 1.5, size=np.shape(o)).astype(np.float32)
            wv = block.create_var(name=f"gc_w{i}", shape=w.shape, dtype="float32")
            feed[wv.name] = w
            prod = block.create_var(name=f"gc_p{i}", dtype="float32")
            block.append_op("elementwise_mul", {"X": v, "Y": wv}, {"Out": prod})
            s = block.create_var(name=f"gc_s{i}", dtype="float32")
            block.append_op("mean", {"X": prod}, {"Out": s})
            terms.append(s)
        loss = block.create_var(name="gc_loss", dtype="float32", shape=[1])
        block.append_op("sum", {"X": terms}, {"Out": loss})
        targets = [in_vars[w][0] if isinstance(w, str) else in_vars[w[0]][w[1]] for w in wrt]
        grads = [g for g in gradients([loss], targets) if g is not None]
    if not grads:
        return set()
    reset_random_states(main, scope)
    want = exe.run(main, feed=feed, fetch_list=grads, scope=scope)
    return compare_compiled(main, feed, grads, want, scope, f"{op_type} gradients")

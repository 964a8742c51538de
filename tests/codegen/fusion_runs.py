"""What the conv-net fusion tests share (test_bn_relu_fusion, test_relu_grad_fusion): a few
SGD steps of an image classifier, compiled or interpreted; the ops a fusion pass fused; and
the check that a fused step changes no bit of the unfused compiled one."""
import numpy as np

import fluidity as fluid
from fluidity.codegen import segment


def run_steps(main, startup, fetch, compiled, steps=2, image=(2, 6, 6), edit=None):
    """([fetched values a step], parameters after the steps, the program run) of `steps`
    SGD steps on batches of 3, 1, 2 images; `edit(x)` may change a batch first."""
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    prog = fluid.CompiledProgram(main).with_native_code(
        feed=["img", "label"], fetch_list=fetch) if compiled else main
    rng = np.random.default_rng(4)
    out = []
    for n in (3, 1, 2)[:steps]:
        x = rng.normal(size=(n, *image)).astype("float32")
        if edit is not None:
            edit(x)
        feed = {"img": x, "label": rng.integers(0, 3, (n, 1)).astype("int64")}
        out.append([np.asarray(v) for v in exe.run(prog, feed=feed, fetch_list=fetch,
                                                    scope=scope)])
    params = [np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()]
    return out, params, prog


def fused_ops(prog, pass_name):
    """The types of the ops explain() says the fusion pass `pass_name` fused."""
    mark = f"({pass_name})"
    return [line.split()[1] for line in prog.explain().splitlines() if mark in line]


def fused_as_unfused(run, pass_name, fused_type, monkeypatch):
    """`run(compiled)` with the fusion pass `pass_name` (which must fuse exactly one
    `fused_type` op) and with it off: every fetched value and parameter bit for bit the
    same. Returns the fused run."""
    fused = run(True)
    assert fused_ops(fused[2], pass_name) == [fused_type]
    with monkeypatch.context() as m:
        m.setattr(segment, pass_name, lambda *a: {})
        plain = run(True)
        assert fused_ops(plain[2], pass_name) == []
    for ra, rb in zip(fused[0], plain[0]):
        for va, vb in zip(ra, rb):
            np.testing.assert_array_equal(va, vb)
    for pa, pb in zip(fused[1], plain[1]):
        np.testing.assert_array_equal(pa, pb)
    return fused


def unfused_as_interpreted(run, pass_name, atol):
    """`run(compiled)` where the fusion pass `pass_name` must fuse nothing: its fetches
    those of the interpreter, within a few float roundings (rtol 1e-5) or `atol`."""
    got = run(True)
    assert fused_ops(got[2], pass_name) == []
    want = run(False)
    for g, w in zip(got[0], want[0]):
        for a, b in zip(g, w):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=atol)

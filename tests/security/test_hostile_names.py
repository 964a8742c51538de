"""Variable names are data: a model whose every variable has a hostile name (every control
character, quotes, a backslash before a newline, `*/`, `??/`, unicode, and payloads that
would create a canary file if they reached the generated C++ as code) runs through every
compiled path - `CompiledProgram(...).with_native_code()`, a saved `__model__` loaded and
compiled, `fluidity compile` and its executable - with zero code executed (the canary never
appears), the interpreter's results, and the names themselves in the messages."""
import ctypes
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from hostile import assert_no_payload, hostile_names, payloads
from op_test import COMPILED_ATOL, COMPILED_RTOL

import fluidity as fluid
from fluidity.codegen import build
from fluidity.codegen.lower import Lowering
from fluidity.errors import ExecutionError, ProgramFormatError
from fluidity.framework import Program

N_IN = 6


@pytest.fixture
def canary(tmp_path):
    path = tmp_path / "CANARY"
    yield str(path)
    assert not path.exists(), "a payload in a variable name ran as code"


def _build():
    """(main, startup, feed names, output name) of N_IN [-1, 4] inputs added up, an fc with
    relu, a softmax."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        xs = [fluid.data(name=f"in{k}", shape=[-1, 4], dtype="float32") for k in range(N_IN)]
        h = xs[0]
        for x in xs[1:]:
            h = fluid.layers.elementwise_add(h, x)
        h = fluid.layers.fc(h, size=3, act="relu")
        y = fluid.layers.softmax(h)
    return main, start, [x.name for x in xs], y.name


def hostile_program(canary):
    """_build() with every variable renamed to a name of the corpus (in main and startup);
    returns (main, startup, feed names, output name, {old: new})."""
    main, start, feeds, out = _build()
    names = hostile_names(canary)
    olds = sorted(main.global_block().vars)
    mapping = {}
    for k, old in enumerate(olds):
        new = names[k % len(names)]
        mapping[old] = new if k < len(names) else f"{k}{new}"
    for prog in (main, start):
        block = prog.global_block()
        for old, new in mapping.items():
            if old in block.vars:
                block._rename_var(old, new)
    return main, start, [mapping[f] for f in feeds], mapping[out], mapping


def _feed(feeds, rows=3):
    rng = np.random.default_rng(0)
    return {n: rng.uniform(-1, 1, (rows, 4)).astype(np.float32) for n in feeds}


@pytest.fixture
def model(canary):
    main, start, feeds, out, mapping = hostile_program(canary)
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(start, scope=scope)
    feed = _feed(feeds)
    (want,) = exe.run(main, feed=feed, fetch_list=[out], scope=scope)
    return main, feeds, out, scope, feed, want, mapping


def test_the_corpus_runs_code_through_the_old_escaping(tmp_path):
    """The corpus is worth running: a message literal escaped as the code generator once
    escaped names (backslash and quote only) runs the splice payload and makes the canary."""
    canary = tmp_path / "WOULD_RUN"
    name = payloads(str(canary))[1]
    old = name.replace("\\", "\\\\").replace('"', '\\"')
    source = ('#include "fluidity.h"\nextern "C" int seg(char* err) {\n'
              f'  if (err == nullptr) return fl::mismatch(err, "{old}: rank is not 2");\n'
              "  return 0;\n}\n")
    build.load(build.compile_cached(source, name="old_escaping")).seg(b"x" * 512)
    assert canary.exists()


def test_with_native_code_runs_hostile_names_as_data(model, canary):
    main, feeds, out, scope, feed, want, mapping = model
    low = Lowering(main, 0, keep=[out])
    assert low.segments and all(w != "python" for _, t, w, _ in low.explain()
                                if t not in ("feed", "fetch"))
    assert_no_payload(low.source)
    compiled = fluid.CompiledProgram(main).with_native_code()
    (got,) = fluid.Executor().run(compiled, feed=feed, fetch_list=[out], scope=scope)
    np.testing.assert_allclose(got, want, rtol=COMPILED_RTOL, atol=COMPILED_ATOL)


def test_the_messages_hold_the_names_byte_for_byte(model, caplog):
    """A parameter of another shape than its declaration makes the segment return its
    message, built in C from the escaped literal: it holds the very name."""
    main, feeds, out, scope, feed, want, mapping = model
    (w,) = [v for v in main.global_block().vars.values() if v.persistable and
            list(v.shape) == [4, 3]]
    scope.find_var(w.name).get_tensor().set(np.zeros((4, 5), np.float32))
    compiled = fluid.CompiledProgram(main).with_native_code()
    with caplog.at_level(logging.WARNING, logger="fluidity"), pytest.raises(ExecutionError):
        fluid.Executor().run(compiled, feed=feed, fetch_list=[out], scope=scope)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert f"({w.name}: dim 1 is not 3)" in text


def test_a_saved_model_with_hostile_names_loads_and_compiles(model, tmp_path, canary):
    main, feeds, out, scope, feed, want, mapping = model
    exe = fluid.Executor()
    d = str(tmp_path / "model")
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(d, feeds, [main.global_block().var(out)], exe, main,
                                      params_filename="params")
    scope2 = fluid.Scope()
    with fluid.scope_guard(scope2):
        prog, feed_names, fetch_vars = fluid.io.load_inference_model(d, exe,
                                                                     params_filename="params")
        assert feed_names == feeds
        compiled = fluid.CompiledProgram(prog).with_native_code()
        (got,) = exe.run(compiled, feed=feed, fetch_list=fetch_vars)
    np.testing.assert_allclose(got, want, rtol=COMPILED_RTOL, atol=COMPILED_ATOL)


def test_fluidity_compile_builds_hostile_names_as_data(model, tmp_path, canary):
    main, feeds, out, scope, feed, want, mapping = model
    exe = fluid.Executor()
    d = str(tmp_path / "model")
    with fluid.scope_guard(scope):         # Paddle 2's layout: the CLI takes its path prefix
        fluid.io.save_inference_model(d, feeds, [main.global_block().var(out)], exe, main,
                                      model_filename="m.pdmodel",
                                      params_filename="m.pdiparams")
    r = subprocess.run([sys.executable, "-m", "fluidity.cli", "compile", d + "/m", "-o",
                        str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    args = []
    for k, n in enumerate(feeds):
        np.save(tmp_path / f"in{k}.npy", feed[n])
        args.append(str(tmp_path / f"in{k}.npy"))     # in the model's feed order
    r = subprocess.run([str(tmp_path / "out" / "model_run"), *args, "-o",
                        str(tmp_path / "o")], capture_output=True)
    assert r.returncode == 0, r.stderr[-2000:]
    (npy,) = os.listdir(tmp_path / "o")
    np.testing.assert_allclose(np.load(tmp_path / "o" / npy), want, rtol=COMPILED_RTOL,
                               atol=COMPILED_ATOL)
    lib = ctypes.CDLL(str(tmp_path / "out" / "libfluidity_model.so"))
    lib.fluidity_model_input_name.restype = ctypes.c_char_p      # the tables' names: the bytes
    assert [lib.fluidity_model_input_name(k) for k in range(N_IN)] == [f.encode() for f in feeds]


@pytest.mark.parametrize("bad, why", [("a\x00b", "NUL"), ("", "empty"),
                                      ("n" * 5000, "bytes long")])
def test_only_unusable_names_are_refused_at_load(bad, why):
    main, _, _, _ = _build()
    desc = main.desc.__class__()
    desc.CopyFrom(main.desc)
    desc.blocks[0].vars[0].name = bad
    with pytest.raises(ProgramFormatError, match=why):
        Program.parse_from_string(desc.SerializeToString())


def test_any_other_name_loads(canary):
    main, start, feeds, out, mapping = hostile_program(canary)
    back = Program.parse_from_string(main.desc.SerializeToString())
    assert set(back.global_block().vars) == set(main.global_block().vars)

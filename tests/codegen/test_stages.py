"""The lowering's stages one at a time, on their plain data: segmentation (which ops compile
together, and why the others do not), the buffer plan (outputs, arena slots), rendering (the
text, through an indented writer); the emitter registry; the fusion pass named in explain()."""
import pytest

import fluidity as fluid
from fluidity.codegen import emit
from fluidity.codegen.buffers import plan_buffers, slot_members
from fluidity.codegen.control import Branch, End, Loop
from fluidity.codegen.dim import Dim
from fluidity.codegen.lower import Lowering
from fluidity.codegen.render import CPP, op_symbols, render_segment
from fluidity.codegen.segment import FusedOp, OpUnit, PythonOp, Segment, later_reads, \
    segment_block
from fluidity.codegen.targets import target
from fluidity.codegen.writer import Writer


def _program(cut=False, train=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data("x", [6])
        h = fluid.layers.fc(x, 8, act="relu")
        if cut:
            h = fluid.layers.Print(h, first_n=1)      # I/O: never compiled, cuts the segment
        y = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(y)
        if train:
            fluid.optimizer.SGD(0.1).minimize(loss)
    return main, loss


def test_segmentation_cuts_at_an_op_with_no_compiled_form_and_says_why():
    main, _ = _program(cut=True)
    parts, created, fusions = segment_block(main, 0, set(), target("cpu"))
    kinds = [type(p).__name__ for p in parts]
    assert kinds.count("Segment") == 2 and "PythonOp" in kinds
    py = [p for p in parts if isinstance(p, PythonOp)]
    assert any("'print' acts on the run itself" in p.reason for p in py)
    assert created == set() and fusions == {"sgd_into_gradient": {}, "conv_epilogue": {},
                                            "conv_chain": {}, "relu_into_batch_norm": {},
                                            "relu_grad_into_gradient": {}}
    seg = next(p for p in parts if isinstance(p, Segment))
    assert all(isinstance(u, OpUnit) for u in seg.units)
    assert [b.kind for b in seg.inputs] == ["input"] * len(seg.inputs)
    assert seg.inputs[0].var == "x" and seg.inputs[0].dims[0] == Dim.sym("in0_d0")


def test_a_rolled_back_op_leaves_the_segment_as_it_was():
    main, _ = _program()
    seg = Segment(0)
    mark = seg.mark()
    seg.sites.append("x")
    seg.inputs.append("y")
    seg.rollback(mark)
    assert seg.sites == [] and seg.inputs == []


def test_the_buffer_plan_picks_outputs_and_shares_slots_by_lifetime():
    main, loss = _program()
    parts, _, _ = segment_block(main, 0, {loss.name}, target("cpu"))
    (seg,) = [p for p in parts if isinstance(p, Segment)]
    after = later_reads(main, main.global_block().ops)
    plan_buffers(seg, after[seg.last], {loss.name}, main.global_block())
    assert [b.var for b in seg.outputs] == [loss.name]
    members = slot_members(seg)
    assert 0 < seg.n_slots < len([b for b in seg.bufs if b.slot is not None])
    for bufs in members.values():             # buffers sharing a slot never live at once
        spans = sorted((b.first, b.last) for b in bufs)
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


def test_rendering_writes_each_op_function_and_the_segment_function():
    main, loss = _program()
    low = Lowering(main, 0, keep=[loss.name])
    text = "\n".join(render_segment(low.segments[0], CPP))
    assert text.count("static __attribute__((noinline)) int fl_seg_0_op") == \
        len(low.segments[0].sites)
    assert 'extern "C" int fl_seg_0(int64_t* args' in text
    assert "fl_inputs(args)" in text and "fl_outputs(args, " in text
    assert "int sizes_ok = 1;" in text and "fl_align_checked(" in text


def test_an_op_function_takes_the_run_time_dims_its_buffers_have():
    main, loss = _program()
    seg = Lowering(main, 0, keep=[loss.name]).segments[0]
    first = next(u for u in seg.units if isinstance(u, OpUnit))
    assert op_symbols(first) == ["in0_d0"]      # the batch of x, read at run time


def test_control_flow_is_statements_of_the_segment_function():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", 5)
        cond = fluid.layers.less_than(i, n)
        loop = fluid.layers.While(cond)
        with loop.block():
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
    low = Lowering(main, 0, keep=[i.name])
    items = [it for u in low.segments[0].units if not isinstance(u, OpUnit) for it in u.items]
    assert any(isinstance(it, Loop) for it in items) and any(isinstance(it, End)
                                                            for it in items)
    assert not any(isinstance(it, Branch) for it in items)
    assert "while (" in low.source


def test_the_writer_indents_blocks_and_braced_lines():
    w = Writer()
    with w.block("int f() {"):
        w.line("return 0;")
    w.braced(["if (a) {", "x;", "}"])
    assert w.lines == ["int f() {", "  return 0;", "}", "if (a) {", "  x;", "}"]


def test_the_sgd_fusion_is_a_named_pass_explain_names():
    main, loss = _program(train=True)
    low = Lowering(main, 0, keep=[loss.name])
    assert len(low.fusions["sgd_into_gradient"]) == 4      # every sgd may be fused ...
    fused = [p for p in low.parts if isinstance(p, FusedOp)]   # ... the gemms' ones are
    assert len(fused) == 2 and {p.fusion for p in fused} == {"sgd_into_gradient"}
    rows = [why for _, t, _, why in low.explain() if t == "sgd" and why.startswith("fused")]
    assert len(rows) == 2 and all("(sgd_into_gradient)" in why for why in rows)
    from fluidity.codegen.explain import format_explain
    assert "\nfusions: sgd_into_gradient (2 ops)\n" in format_explain(low.explain())


def test_the_registry_finds_emitters_per_target_and_refuses_a_second_one():
    assert emit.lookup("mul", "cpu") is not None and emit.lookup("mul", "cuda") is not None
    assert emit.lookup("print", "cpu") is None             # cuts the segment
    assert emit.lookup("elementwise_mod", "cuda") is None
    assert "relu" in emit.op_types("cpu") and emit.targets_of("relu")[:2] == ["cpu", "cuda"]
    with pytest.raises(ValueError, match="already has a cpu emitter"):
        emit.register("mul", "cpu")(lambda e: None)
    with pytest.raises(ValueError, match="unknown code generator target"):
        emit.register("mul", "tpu")
    with pytest.raises(ValueError, match="target must be one of"):
        emit.lookup("mul", "tpu")
    with pytest.raises(ValueError, match="target must be one of"):
        Lowering(fluid.Program(), 0, target="tpu")

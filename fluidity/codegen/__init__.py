"""The native code generator: a block of a ProgramDesc in, C++ (or CUDA, or C) out, compiled
by the system compiler into a library (cached by the source's hash) that runs the block's
compilable ops without the Python interpreter.

Lowering is three stages with plain data between them (lower.py runs them):

* `segment`: which ops compile together and why the others do not (PythonOp / FusedOp /
  Segment of OpUnits and control statements); `fusion`: the fusion passes it applies;
  `control`: `while` and `conditional_block` as loops and branches;
* `buffers`: a segment's outputs and arena slots coloured by lifetime;
* `render`: the source text through an indented `writer`, per target `Dialect`.

Around them: `abi`, the segment's calling convention (runtime/segment_args.h's twin);
`cir`, buffers with symbolic dims and the `Emit` context emitters write through; `emit/`,
the emitters registered per op type and target (`emit.lookup(op_type, target)`);
`targets`, the registry of targets; `build`, compile, cache, load; `cuda`, the CUDA
target's device checks; `standalone`, a saved model as a library and executable;
`explain`, where each op runs and why; `runtime/*.h`, the functions generated code calls.

The executor runs it as the "native" plan kind (fluidity/executor/native.py);
`fluid.CompiledProgram(program).with_native_code()` is the user's way in.
"""

"""The native code generator: a block of a ProgramDesc in, C++ out, compiled by the system
compiler into a library (cached by the source's hash) that runs the block's compilable ops
without the Python interpreter.

* `lower`: ops -> segments (runs of compilable ops) and Python ops; buffers, arena, C++;
* `cir`: buffers with symbolic dims and the context op emitters write through;
* `emitters`: `rule_for(opdef)`, the generic elementwise lowering of `c_expr`;
* `build`: compile, cache, load; `runtime/fluidity.h`: the primitives emitters call;
* `explain`: where each op runs and why.

The executor runs it as the "native" plan kind (fluidity/executor/native.py);
`fluid.CompiledProgram(program).with_native_code()` is the user's way in.
"""

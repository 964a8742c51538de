"""The IR layer: desc-level facts and rewrites shared by the builder, the executors, the
passes and the code generator.

* `views`: ProgramView / BlockView / OpView / VarView, read-only windows on a ProgramDesc;
* `analysis`: what ops read and write, dependencies, topological order, temporaries;
* `memory_plan`: temporaries at offsets of one arena (interval colouring);
* `rewrite`: insert, remove and rename ops and variables, add blocks, copy programs;
* `infer_shape`: the context an op's shape inference runs in;
* `format`: programs as readable text.

Imports run `core <- ops <- ir <- {framework, executor, transpiler, codegen}`.
"""
from . import analysis, desc_api, format, memory_plan, rewrite, views  # noqa: F401
from .views import BlockView, OpView, ProgramView, VarView, as_program_view  # noqa: F401

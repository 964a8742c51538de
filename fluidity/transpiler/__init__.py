"""Program-rewriting passes over the ProgramDesc (inference copies, memory reuse, ...).

Fluid's `fluid.transpiler` names are functions and classes here too:
`from fluidity.transpiler import memory_optimize` gives the pass, not a module (the module
is `memory_optimization`)."""
from .memory_optimization import memory_optimize, release_memory  # noqa: F401

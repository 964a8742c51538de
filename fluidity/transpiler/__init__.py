"""Program-rewriting passes over the ProgramDesc (inference copies, memory reuse, ...).

Fluid's `fluid.transpiler` names are functions and classes here too:
`from fluidity.transpiler import memory_optimize` gives the pass, not a module (the module
is `memory_optimization`)."""
from .memory_optimization import memory_optimize, release_memory  # noqa: F401

# Fluid's distributed-training transpiler and its parameter-server dispatchers
# (distribute.py is the pure pass; distribute_transpiler.py is Fluid's API over it)
from . import distribute  # noqa: F401,E402
from .distribute_transpiler import (DistributeTranspiler,  # noqa: F401,E402
                                    DistributeTranspilerConfig, HashName, RoundRobin)
from .ps_dispatcher import PSDispatcher  # noqa: F401,E402

"""Program-rewriting passes over the ProgramDesc (inference copies, memory reuse, ...).

Fluid's `fluid.transpiler` names are functions and classes here too:
`from fluidity.transpiler import memory_optimize` gives the pass, not a module (the module
is `memory_optimization`)."""
from .memory_optimization import memory_optimize, release_memory  # noqa: F401

# Fluid's distributed-training transpiler and its parameter-server dispatchers: another
# issue builds them (transpiler/distribute/); until then each says so when used.
from ..errors import declined_class as _declined_class  # noqa: E402

_DIST = "distributed training (trainer and parameter-server programs) is not built yet"
DistributeTranspiler = _declined_class(
    "transpiler.DistributeTranspiler", _DIST,
    ("transpile", "get_trainer_program", "get_pserver_program", "get_pserver_programs",
     "get_startup_program"))
DistributeTranspilerConfig = _declined_class("transpiler.DistributeTranspilerConfig", _DIST)
HashName = _declined_class("transpiler.HashName", _DIST, ("dispatch", "reset"))
RoundRobin = _declined_class("transpiler.RoundRobin", _DIST, ("dispatch", "reset"))

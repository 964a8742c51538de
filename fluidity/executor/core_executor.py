"""Fluid's `fluid.core.Executor`: the binding under `fluid.Executor` that programs and tests
call directly, `core.Executor(place).run(program_desc, scope, block_id, create_local_scope,
create_vars, fetch_vars)`.

It runs one block of a ProgramDesc in a scope with Fluidity's Executor (the plan is cached
per desc), with Fluid 1.8's garbage collection: when the run keeps its variables in `scope`
(create_local_scope=False) and eager deletion is on (`FLAGS_eager_delete_tensor_gb` >= 0,
Fluid's default; `core._set_eager_deletion_mode(-1, ...)` turns it off), every
non-persistable variable of the block but those in `fetch_vars` still exists afterwards and
holds no data, as Fluid's collector leaves it after the variable's last use. With a local
scope the temporaries go with that scope, as in Fluid.
"""
from ..core import flags
from ..core.place import Place
from ..core.tensor import LoDTensor, SelectedRows
from ..ir.views import ProgramView
from .executor import Executor

__all__ = ["CoreExecutor", "eager_deletion_on", "release_temporaries"]


def eager_deletion_on():
    """Whether Fluid's collector would free dead values (FLAGS_eager_delete_tensor_gb >= 0)."""
    return flags.flag("FLAGS_eager_delete_tensor_gb") >= 0


def _emptied(value):
    """`value` without its data, as Fluid's collector leaves a variable (a LoDTensor or a
    SelectedRows' value tensor uninitialized; other holders as they are)."""
    if isinstance(value, LoDTensor):
        return LoDTensor()
    if isinstance(value, SelectedRows):
        return SelectedRows()
    return value


def release_temporaries(scope, block, keep=()):
    """Free the data of `block`'s non-persistable variables held by `scope` itself (not its
    ancestors), but those named in `keep`: what Fluid's eager deletion has freed by the end
    of a run."""
    keep = set(keep)
    for name, var in block.vars.items():
        if var.persistable or name in keep:
            continue
        held = scope.find_local_var(name)
        if held is not None and held.value is not None:
            held.value = _emptied(held.value)


class CoreExecutor:
    """`core.Executor(place)`: `place` a CPUPlace, CUDAPlace or a `core.Place` holding one."""

    def __init__(self, place):
        if not isinstance(place, Place):
            raise TypeError(f"core.Executor: expected a place (fluid.CPUPlace(), or a "
                            f"core.Place given one with set_place), got {type(place).__name__}")
        self._place = place._target()
        self._executor = Executor(self._place)
        self._views = {}     # id(program desc) -> (desc, its view): one prepared plan per desc

    def _view(self, program_desc):
        if isinstance(program_desc, ProgramView):
            return program_desc
        entry = self._views.get(id(program_desc))
        if entry is None or entry[0] is not program_desc:
            entry = self._views[id(program_desc)] = (program_desc, ProgramView(program_desc))
        return entry[1]

    def create_variables(self, program_desc, scope, block_id):
        """Create every variable of block `block_id` in `scope`; persistable ones in its root
        scope, as Fluid's CreateVariables does."""
        root = scope.root()
        for name, var in self._view(program_desc).block(block_id).vars.items():
            (root if var.persistable else scope).var(name)

    def run(self, program_desc, scope, block_id=0, create_local_scope=True, create_vars=True,
            fetch_vars=()):
        view = self._view(program_desc)
        if not 0 <= block_id < view.num_blocks:
            raise IndexError(f"core.Executor.run: block_id {block_id} out of range: the "
                             f"program has {view.num_blocks} blocks")
        if create_vars:
            self.create_variables(view, scope, block_id)
        self._executor.run(view, scope=scope, block_id=block_id,
                           create_local_scope=create_local_scope)
        if not create_local_scope and eager_deletion_on():
            release_temporaries(scope, view.block(block_id), fetch_vars)

    def close(self):
        self._executor.close()

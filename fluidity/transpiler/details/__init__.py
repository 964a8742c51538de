"""Fluid's `fluid.transpiler.details`: the helpers its transpilers share and that programs
import (op lookups over a block, a union-find over ops, waiting for servers, and the
distributed-variables overview the transpiler leaves on a program)."""
from ..vars_distributed import VarDistributed, VarsDistributed, VarStruct  # noqa: F401
from .checkport import wait_server_ready  # noqa: F401
from .program_utils import delete_ops, find_op_by_input_arg, find_op_by_output_arg  # noqa: F401
from .ufind import UnionFind  # noqa: F401

__all__ = ["VarStruct", "VarDistributed", "VarsDistributed", "wait_server_ready",
           "delete_ops", "find_op_by_input_arg", "find_op_by_output_arg", "UnionFind"]

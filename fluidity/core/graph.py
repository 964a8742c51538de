"""`fluid.core.Graph` and `fluid.core.Node`: Fluid 1.8's SSA graph of a program's global
block, as its Python tests and tools build and inspect one.

Fluidity runs programs as ProgramDescs (its passes are functions from descs to descs), so
this graph is only a view built from a desc, for programs that look at one: one `Operation`
node per op, a `Variable` node per variable an op reads (shared by its readers until an op
writes the variable again) and a new one per variable an op writes, as Fluid's
`Graph(program_desc)` makes them; plus Fluid's graph attributes (`set`/`get_int`/...) and
node editing. Nothing here changes the program.
"""
import enum

from ..errors import FluidityError


class Node:
    """One node: its name (op type or variable name), type, and the op or variable desc it
    stands for (None for one made empty)."""

    class Type(enum.IntEnum):
        Operation = 0
        Variable = 1

    def __init__(self, name, node_type, node_id, desc=None):
        self._name, self._type, self._id, self._desc = name, node_type, node_id, desc
        self.inputs, self.outputs = [], []

    def name(self):
        return self._name

    def node_type(self):
        return self._type

    def id(self):
        return self._id

    def is_op(self):
        return self._type == Node.Type.Operation

    def is_var(self):
        return self._type == Node.Type.Variable

    def op(self):
        if not self.is_op():
            raise FluidityError(f"node '{self._name}' is not an operation")
        return self._desc

    def var(self):
        if not self.is_var():
            raise FluidityError(f"node '{self._name}' is not a variable")
        return self._desc

    def __repr__(self):
        return f"Node({self._name!r}, {self._type.name})"


class Graph:
    """Fluid's `core.Graph(program_desc)` (see the module's note)."""

    CONTROL_DEP_VAR = "__control_var"

    def __init__(self, program_desc, start_op_index=0, end_op_index=None):
        self._program = program_desc
        self._nodes = []
        self._created = 0
        self._attrs = {}
        block = program_desc.blocks[0] if len(program_desc.blocks) else None
        ops = list(block.ops)[start_op_index:end_op_index] if block is not None else []
        var_descs = {v.name: v for v in block.vars} if block is not None else {}
        latest = {}
        for od in ops:
            op_node = self.create_op_node(od)
            for slot in od.inputs:
                for n in slot.arguments:
                    v = latest.get(n)
                    if v is None:
                        v = latest[n] = self._add(n, Node.Type.Variable, var_descs.get(n))
                    v.outputs.append(op_node)
                    op_node.inputs.append(v)
            for slot in od.outputs:
                for n in slot.arguments:
                    v = latest[n] = self._add(n, Node.Type.Variable, var_descs.get(n))
                    v.inputs.append(op_node)
                    op_node.outputs.append(v)

    def _add(self, name, node_type, desc=None):
        node = Node(name, node_type, self._created, desc)
        self._created += 1
        self._nodes.append(node)
        return node

    # -- nodes ------------------------------------------------------------------------------
    def nodes(self):
        """The graph's nodes, as a set (Fluid returns an unordered set)."""
        return set(self._nodes)

    def all_op_nodes(self):
        return {n for n in self._nodes if n.is_op()}

    def all_var_nodes(self):
        return {n for n in self._nodes if n.is_var()}

    def create_var_node(self, var_desc):
        return self._add(var_desc.name, Node.Type.Variable, var_desc)

    def create_op_node(self, op_desc):
        return self._add(op_desc.type, Node.Type.Operation, op_desc)

    def create_control_dep_var(self):
        return self._add(f"{self.CONTROL_DEP_VAR}@{self._created}", Node.Type.Variable)

    def create_empty_node(self, name, node_type):
        return self._add(name, Node.Type(node_type))

    def retrieve_node(self, node_id):
        for n in self._nodes:
            if n.id() == node_id:
                return n
        raise FluidityError(f"the graph has no node {node_id}")

    def remove_node(self, node):
        self._nodes.remove(node)
        return node

    def release_nodes(self):
        """Take every node out of the graph; returns them."""
        nodes, self._nodes = self._nodes, []
        return nodes

    def origin_program_desc(self):
        return self._program

    # -- graph attributes -------------------------------------------------------------------
    def has(self, name):
        return name in self._attrs

    def set(self, name, value):
        self._attrs[name] = value

    def get_int(self, name):
        return int(self._get(name))

    def get_float(self, name):
        return float(self._get(name))

    def get_string(self, name):
        return str(self._get(name))

    def _get(self, name):
        if name not in self._attrs:
            raise FluidityError(f"the graph has no attribute '{name}'")
        return self._attrs[name]

    def erase(self, name):
        self._get(name)
        del self._attrs[name]

"""What an op's `infer_shape` sees when the op is added to a block: its inputs' variables and
attributes, and setters for its outputs' shape, dtype, LoD level and type."""
from ..errors import ShapeError, VariableNotFoundError
from ..ops import registry
from .views import TENSORLIKE


class InferShapeContext:
    def __init__(self, op):
        self.op = op
        self.block = op.block
        self.opdef = registry.get(op.type)

    def attr(self, name):
        return self.op.attr(name)

    def _var(self, name):
        return self.block.find_var_recursive(name)

    def has_input(self, slot):
        return bool(self.op.input(slot))

    def has_output(self, slot):
        return bool(self.op.output(slot))

    def input_var(self, slot, i=0):
        names = self.op.input(slot)
        if i >= len(names):
            raise ShapeError(f"op '{self.op.type}': input slot '{slot}' has no variable #{i}")
        v = self._var(names[i])
        if v is None:
            raise VariableNotFoundError(f"op '{self.op.type}': input '{slot}' names variable "
                                        f"'{names[i]}', which is not in the program")
        return v

    def input_vars(self, slot):
        return [self.input_var(slot, i) for i in range(len(self.op.input(slot)))]

    def input_shape(self, slot, i=0):
        return list(self.input_var(slot, i).shape)

    def input_shapes(self, slot):
        return [list(v.shape) for v in self.input_vars(slot)]

    def input_dtype(self, slot, i=0):
        return self.input_var(slot, i).dtype

    def input_lod_level(self, slot, i=0):
        return self.input_var(slot, i).lod_level

    def input_type(self, slot, i=0):
        return self.input_var(slot, i).type

    def output_vars(self, slot):
        out = []
        for n in self.op.output(slot):
            v = self._var(n)
            if v is None:
                raise VariableNotFoundError(f"op '{self.op.type}': output '{slot}' names "
                                            f"variable '{n}', which is not in the program")
            out.append(v)
        return out

    def set_output(self, slot, shape=None, dtype=None, lod_level=None, i=None, type=None):
        """Set the shape/dtype/lod_level of output `slot` (all its vars, or only #i)."""
        vars_ = self.output_vars(slot)
        if i is not None:
            vars_ = vars_[i:i + 1]
        for v in vars_:
            if type is not None:
                v._set_type(type)
            if shape is not None and v.type in TENSORLIKE:
                v._set_shape(shape)
            if dtype is not None:
                v._set_dtype(dtype)
            if lod_level is not None:
                v.lod_level = lod_level

    def same_as_first_input(self):
        if not self.opdef.inputs or not self.opdef.outputs:
            return
        first = self.opdef.inputs[0].name
        if not self.has_input(first):
            return
        src = self.input_var(first)
        for s in self.opdef.outputs:
            if self.has_output(s.name) and not s.intermediate:
                self.set_output(s.name, src.shape, src.dtype, src.lod_level)

    def share(self, in_slot, out_slot, dtype=None):
        src = self.input_var(in_slot)
        self.set_output(out_slot, src.shape, dtype if dtype is not None else src.dtype,
                        src.lod_level)

    def fail(self, message, error=ShapeError):
        """Raise a ShapeError (or `error`, a subclass of it) naming this op and its inputs'
        shapes."""
        def shapes(slot):
            return [list(self._var(n).shape) if self._var(n) else "?"
                    for n in self.op.input(slot)]
        desc = ", ".join(f"{s}={shapes(s)}" for s in self.op.input_names)
        raise error(f"op '{self.op.type}' ({desc}): {message}")

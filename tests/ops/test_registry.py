"""The op registry's public face: one kernel form per op, schemas, lookups."""
import numpy as np
import pytest

from fluidity.errors import UnknownOpError
from fluidity.ops import registry
from fluidity.ops.registry import Allocating, In, OpDef, Out


def test_every_registered_op_is_written_one_way():
    problems = [p for op in registry.all_ops().values() for p in registry.check_opdef(op)]
    assert problems == []


def test_find_get_has():
    assert registry.find("scale") is registry.get("scale")
    assert registry.find("no_such_op") is None
    assert registry.has("mul") and not registry.has("no_such_op")
    with pytest.raises(UnknownOpError, match="did you mean"):
        registry.get("scael")


def test_schema_faces():
    scale = registry.get("scale")
    d = scale.defaults()
    assert d["scale"] == 1.0 and d["bias_after_scale"] is True and "op_role" in d
    d["scale"] = 5.0                       # a copy: the schema is not changed through it
    assert scale.defaults()["scale"] == 1.0
    assert scale.declares("bias") and not scale.declares("alpha")
    assert scale.attr_type("scale") == registry.AttrType.FLOAT
    assert scale.attr_type("nope") is None
    assert "op_role" not in scale.attr_names(common=False)
    assert registry.get("mul").input_names() == ("X", "Y")


def test_kernel_with_attributes_by_name_and_prepare():
    class _K(OpDef):
        inputs, outputs = (In("X"),), (Out("Out"),)
        attrs = {"alpha": 2.0, "beta": 1.0}

        @staticmethod
        def kernel(x, *, alpha):
            return x * alpha

    fn = _K.kernel_for(registry.attrs_of(_K, {"alpha": 3.0}), frozenset({"Out"}))
    assert fn(np.float32(2)) == 6.0

    class _P(_K):
        kernel = None

        @classmethod
        def prepare(cls, attrs, outputs):
            a = attrs["alpha"] + attrs["beta"]
            return lambda x: x * a if "Out" in outputs else None

    assert _P.kernel_for(_P.defaults(), frozenset({"Out"}))(np.float32(1)) == 3.0
    assert registry.check_opdef(_P) == []


def test_check_opdef_names_what_is_wrong():
    class _Both(OpDef):
        attrs = {"a": 1}

        @staticmethod
        def kernel(x, *, a, b):
            return x

        @classmethod
        def prepare(cls, attrs, outputs):
            return None

    problems = registry.check_opdef(_Both)
    assert any("exactly one" in p for p in problems)
    assert any("undeclared attributes ['b']" in p for p in problems)


def test_allocating_kernel_is_the_plain_kernel_when_called():
    k = Allocating(lambda x: x + 1, lambda x, alloc: np.add(x, 1, out=alloc(x.shape, x.dtype)))
    x = np.arange(3, dtype=np.float32)
    buf = np.empty(3, np.float32)
    assert np.array_equal(k(x), k.into(x, lambda s, d: buf))
    assert np.array_equal(buf, x + 1)

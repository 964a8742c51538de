"""Transitional: the emitters op classes still carry, registered for the cpu target."""
from ....ops import registry
from ...emitters import rule_for
from .. import register

for _t, _d in registry.all_ops().items():
    _r = rule_for(_d, "cpu")
    if _r is not None:
        register(_t, "cpu")(_r)

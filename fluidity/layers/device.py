"""`fluid.layers.device`: Fluid's device layers, one left in 1.x: `get_places`.

    from fluidity.layers.device import get_places     # as Fluid 1.x book chapters import it
    places = get_places(device_count=2, device_type="CPU")   # a PLACE_LIST variable

Fluid 0.15 deprecated it for `CompiledProgram.with_data_parallel` (places are given there,
or `fluid.cpu_places()` / `fluid.cuda_places()`), and 1.x programs still import and build
it. Like Fluid's, the module exports nothing into `fluid.layers` itself (`__all__` is empty).
"""
import warnings

from .. import unique_name
from ..core.dtypes import VarType
from ..layer_helper import LayerHelper
from ..ops.device import DEVICE_TYPES

__all__ = []


def get_places(device_count=None, device_type=None):
    """A PLACE_LIST variable that the `get_places` op fills, when the program runs, with
    `device_count` places (None or 0: one per core, or per GPU) of `device_type` ("CPU",
    "CUDA"; None: the kind of place the program runs on). Deprecated, as in Fluid: use
    `CompiledProgram(program).with_data_parallel(places=fluid.cpu_places(n))`."""
    warnings.warn("fluid.layers.device.get_places is deprecated since Fluid 0.15: use "
                  "CompiledProgram.with_data_parallel(places=...) and fluid.cpu_places() / "
                  "fluid.cuda_places()", DeprecationWarning, stacklevel=2)
    attrs = {}
    if device_count is not None:
        if isinstance(device_count, bool) or int(device_count) != device_count or \
                device_count < 0:
            raise ValueError(f"get_places: device_count must be a non-negative int, got "
                             f"{device_count!r}")
        attrs["device_count"] = int(device_count)
    if device_type is not None:
        if str(device_type) not in DEVICE_TYPES:
            raise ValueError(f"get_places: device_type must be one of {list(DEVICE_TYPES)}, "
                             f"got {device_type!r}")
        attrs["device_type"] = str(device_type)
    helper = LayerHelper("get_places")
    out = helper.block().create_var(name=unique_name.generate(f"{helper.name}.out"),
                                    type=VarType.PLACE_LIST)
    helper.append_op(type="get_places", outputs={"Out": [out]}, attrs=attrs)
    return out

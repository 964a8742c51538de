"""fluid.layers.device.get_places and the places API (fluid.core.Place, cpu_places,
cuda_places, CUDAPinnedPlace, place equality and str), as Fluid 1.8 programs use them."""
import os

import pytest

import fluidity as fluid
from fluidity import core
from fluidity.errors import DeviceError, ExecutionError
from fluidity.layers.device import get_places


def _build(**kw):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), pytest.warns(DeprecationWarning):
        places = get_places(**kw)
    return main, places


def test_get_places_builds_a_place_list_variable_and_runs():
    main, places = _build()
    assert places.type == core.VarDesc.VarType.PLACE_LIST
    assert [op.type for op in main.global_block().ops] == ["get_places"]
    exe = fluid.Executor(fluid.CPUPlace())
    (got,) = exe.run(main, fetch_list=[places])
    assert got == [fluid.CPUPlace()] * (os.cpu_count() or 1)   # device_count 0: every core
    main, places = _build(device_count=2, device_type="CPU")
    op = main.global_block().ops[0]
    assert op.attr("device_count") == 2 and op.attr("device_type") == "CPU"
    assert exe.run(main, fetch_list=[places])[0] == [fluid.CPUPlace()] * 2
    # fluid.layers exports nothing from the module, as Fluid's __all__ = []
    assert not hasattr(fluid.layers, "get_places") and fluid.layers.device.__all__ == []


def test_get_places_refuses_what_fluid_refuses():
    with pytest.raises(ValueError, match="device_type"):
        _build(device_type="TPU")
    with pytest.raises(ValueError, match="device_count"):
        _build(device_count=-1)
    if core.get_cuda_device_count() == 0:
        main, _ = _build(device_type="CUDA", device_count=1)
        with pytest.raises(ExecutionError, match="only 0 CUDA devices"):
            fluid.Executor(fluid.CPUPlace()).run(main)


def test_core_place_holds_a_place_and_answers_fluids_questions():
    p = core.Place()
    with pytest.raises(ValueError, match="holds no place"):
        p.is_cpu_place()
    p.set_place(fluid.CPUPlace())
    assert p.is_cpu_place() and not p.is_gpu_place() and p == fluid.CPUPlace()
    assert p._type() == fluid.CPUPlace()._type() == 1 and fluid.CUDAPlace(0)._type() == 0
    assert fluid.CUDAPinnedPlace()._type() == 2
    assert fluid.CPUPlace()._equals(p) and not fluid.CUDAPlace(0)._equals(p)
    p.set_place(fluid.CUDAPlace(3))
    assert p.is_gpu_place() and p.gpu_device_id() == 3 and str(p) == "CUDAPlace(3)"
    assert str(fluid.CPUPlace()) == "CPUPlace" and str(fluid.CUDAPinnedPlace()) == \
        "CUDAPinnedPlace"
    assert fluid.CUDAPlace(2) == fluid.CUDAPlace(2) and fluid.CUDAPlace(2) != fluid.CUDAPlace(1)
    assert len({fluid.CPUPlace(), fluid.CPUPlace(), fluid.CUDAPlace(0)}) == 2
    with pytest.raises(TypeError):
        fluid.CPUPlace().set_place(fluid.CPUPlace())
    with pytest.raises(ValueError):
        fluid.CUDAPlace(-1)
    # a generic Place runs programs as the place it holds
    p.set_place(fluid.CPUPlace())
    fluid.Executor(p).run(fluid.Program())


def test_cpu_places_follow_cpu_num_and_cuda_places_need_a_gpu(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "4")
    assert fluid.cpu_places() == [fluid.CPUPlace()] * 4
    assert fluid.cpu_places(1) == [fluid.CPUPlace()]
    with pytest.raises(ValueError):
        fluid.cpu_places(0)
    if core.get_cuda_device_count() == 0 and not core.place.cuda_emulated():
        with pytest.raises(DeviceError):
            fluid.cuda_places()
        with pytest.raises(DeviceError):
            fluid.cuda_places(0)
        with pytest.raises(DeviceError):
            fluid.cuda_pinned_places(2)

"""Global flags (Paddle's gflags that Python sets with `fluid.set_flags`).

    fluid.set_flags({"FLAGS_check_nan_inf": True})
    fluid.get_flags(["FLAGS_check_nan_inf"])   # {"FLAGS_check_nan_inf": True}

FLAGS_check_nan_inf: every op's outputs are checked after it runs; the first op that writes
a NaN or Inf stops the run, naming the op, the variable and where the op was created.
Environment variables of the same names set the initial values (as Paddle reads them).

Flags Fluid's programs and tests set that choose among things Fluidity has one of are kept
(read back as set) and change nothing: FLAGS_use_system_allocator (Paddle's allocator or the
system's; tensors here are numpy's), FLAGS_use_mkldnn (MKL-DNN kernels, which Fluidity has
none of; setting it does not make an op use one).

`core.globals()` is Paddle's view of the same flags as a dict: `core.globals()[name]`,
`core.globals()[name] = value` (checked as set_flags checks).
"""
import os

from ..errors import ArgumentTypeError, FlagError, FluidityError

# name -> (type, default)
_KNOWN = {"FLAGS_check_nan_inf": (bool, False),
          "FLAGS_use_system_allocator": (bool, False),
          "FLAGS_use_mkldnn": (bool, False)}
# Paddle 1.8's public flags that tune what Fluidity does its one way; kept as set, with
# Paddle's defaults, and changing nothing but where said: garbage collection (the executors
# here free a value after its last reader whatever the threshold; FLAGS_eager_delete_tensor_gb
# < 0 keeps the temporaries that a `core.Executor` run leaves in the caller's scope, as
# Fluid's), allocators and GPU memory fractions (tensors
# are numpy's; the CUDA target plans one arena), the parallel executor's graph mode and NCCL
# and cuDNN choices (no NCCL or cuDNN is used), Paddle's thread pools, RPC timeouts.
_KEPT_AS_SET = {
    "FLAGS_eager_delete_tensor_gb": (float, 0.0),
    "FLAGS_fast_eager_deletion_mode": (bool, True),
    "FLAGS_memory_fraction_of_eager_deletion": (float, 1.0),
    "FLAGS_allocator_strategy": (str, "auto_growth"),
    "FLAGS_fraction_of_gpu_memory_to_use": (float, 0.92),
    "FLAGS_initial_gpu_memory_in_mb": (int, 0),
    "FLAGS_reallocate_gpu_memory_in_mb": (int, 0),
    "FLAGS_fraction_of_cpu_memory_to_use": (float, 1.0),
    "FLAGS_enable_parallel_graph": (bool, False),
    "FLAGS_sync_nccl_allreduce": (bool, True),
    "FLAGS_cudnn_deterministic": (bool, False),
    "FLAGS_cudnn_exhaustive_search": (bool, False),
    "FLAGS_conv_workspace_size_limit": (int, 512),
    "FLAGS_cudnn_batchnorm_spatial_persistent": (bool, False),
    "FLAGS_benchmark": (bool, False),
    "FLAGS_paddle_num_threads": (int, 1),
    "FLAGS_inner_op_parallelism": (int, 0),
    "FLAGS_rpc_deadline": (int, 180000),
    "FLAGS_rpc_retry_times": (int, 3),
    "FLAGS_communicator_send_queue_size": (int, 20),
    "FLAGS_communicator_max_merge_var_num": (int, 20),
    "FLAGS_selected_gpus": (str, ""),
}
_KNOWN.update(_KEPT_AS_SET)
# Paddle's private flags: read through core.globals(), not through get_flags/set_flags, and
# not writable (Paddle 1.8's REGISTER_PRIVATE_GLOBAL_VAR(false, FLAGS_use_mkldnn, ...))
_PRIVATE = {"FLAGS_use_mkldnn"}


def _parse(name, kind, raw):
    if kind is bool and isinstance(raw, str):
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise FluidityError(f"{name}: expected a bool, got {raw!r}")
    try:
        return kind(raw)
    except (TypeError, ValueError):
        raise FluidityError(f"{name}: expected a {kind.__name__}, got {raw!r}") from None


_values = {n: _parse(n, k, os.environ[n]) if n in os.environ else d
           for n, (k, d) in _KNOWN.items()}


def _check_name(name):
    if name in _PRIVATE:                  # Fluid's words for a flag it keeps to itself
        raise FlagError(f"Flag {name} cannot get its value through this function.")
    if name not in _KNOWN:                # a ValueError, as Fluid's for a flag it hides
        raise FlagError(f"unknown flag {name!r}; known flags: "
                        f"{sorted(set(_KNOWN) - _PRIVATE)}")


def set_flags(flags):
    """Set flags from a dict {name: value}; an unknown name changes nothing."""
    if not isinstance(flags, dict):
        raise ArgumentTypeError(f"flags in set_flags should be a dict, got "
                                f"{type(flags).__name__}")
    parsed = {}
    for name, value in flags.items():
        _check_name(name)
        parsed[name] = _parse(name, _KNOWN[name][0], value)
    _values.update(parsed)


def get_flags(flags):
    """{name: value} of a flag name or a list of names."""
    if not isinstance(flags, (str, list, tuple)):
        raise ArgumentTypeError(f"Flags in get_flags should be a list, tuple or string, got "
                                f"{type(flags).__name__}")
    names = [flags] if isinstance(flags, str) else list(flags)
    for n in names:
        _check_name(n)
    return {n: _values[n] for n in names}


def flag(name):
    return _values[name]


class GlobalFlags:
    """Paddle's `core.globals()`: the flags as a mapping (unknown names raise KeyError)."""
    __slots__ = ()

    def __getitem__(self, name):
        if name not in _KNOWN:
            raise KeyError(name)
        return _values[name]

    def __setitem__(self, name, value):
        if name not in _KNOWN:
            raise KeyError(name)
        if name in _PRIVATE:
            raise FlagError(f"{name} is not writable")
        set_flags({name: value})

    def __contains__(self, name):
        return name in _KNOWN

    def __iter__(self):
        return iter(sorted(_KNOWN))

    def __len__(self):
        return len(_KNOWN)

    def keys(self):
        return sorted(_KNOWN)

    def get(self, name, default=None):
        return _values.get(name, default)

    def is_public(self, name):
        return name in _KNOWN and name not in _PRIVATE


_GLOBALS = GlobalFlags()


def globals():  # noqa: A001 -- Paddle's name: core.globals()
    return _GLOBALS

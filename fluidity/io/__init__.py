"""`fluid.io`: save and load parameters, inference models, checkpoints and program state
in PaddlePaddle's formats.

Every save is atomic as a whole (`fluidity.io.atomic` documents the protocol): it fully
replaces the previous save or leaves it intact and loadable, whatever moment the process
dies, keeps the files of the directory that it does not write, and records a manifest
(`fluidity.io.manifest`) of sizes and checksums that loads verify. Paddle ignores the
manifest; Paddle's own directories load as before.

  variables      save_vars / load_vars and the params / persistables forms (Fluid 1.x)
  inference      save_inference_model / load_inference_model (1.x directory, 2.x prefix)
  checkpoint     save_checkpoint / load_checkpoint / clean_checkpoint (Fluid 1.0-1.2)
  program_state  save / load / load_program_state / set_program_state (Fluid 1.6+)
"""
from .inference import (MODEL_FILENAME, get_feed_target_names, get_fetch_target_names,
                        load_inference_model, load_inference_model_v2, load_program,
                        normalize_program, save_inference_model, save_inference_model_v2)
from .checkpoint import (CheckpointError, clean_checkpoint, get_latest_checkpoint_serial,
                         load_checkpoint, load_trainer_args, save_checkpoint)
from .manifest import ManifestError
from .program_state import load, load_program_state, save, set_program_state
from .variables import (_get_valid_program, get_parameter_value,  # noqa: F401
                        get_parameter_value_by_name, is_parameter, is_persistable, load_params,
                        load_persistables, load_vars, save_params, save_persistables, save_vars)

__all__ = ["is_persistable", "is_parameter", "save_vars", "load_vars", "save_params",
           "load_params", "save_persistables", "load_persistables", "save_inference_model",
           "load_inference_model", "save_inference_model_v2", "load_inference_model_v2",
           "get_feed_target_names", "get_fetch_target_names", "load_program",
           "save_checkpoint", "load_checkpoint", "clean_checkpoint",
           "get_latest_checkpoint_serial", "load_trainer_args", "save", "load",
           "load_program_state", "set_program_state", "ManifestError", "CheckpointError",
           "get_parameter_value", "get_parameter_value_by_name"]

# readers fed from Python (fluid.io.DataLoader, fluid.io.PyReader)
from ..reader.dataloader import DataLoader, PyReader  # noqa: E402,F401
from ..reader.loader_base import DataLoaderBase  # noqa: E402,F401
__all__ += ["DataLoader", "PyReader"]

# Fluid 1.8's fluid.io names for paddle.reader's decorators (the same functions)
from ..reader.decorator import (batch, buffered, cache, chain, compose,  # noqa: E402,F401
                                firstn, map_readers, multiprocess_reader, shuffle,
                                xmap_readers)
__all__ += ["batch", "shuffle", "buffered", "cache", "chain", "compose", "firstn",
            "map_readers", "xmap_readers", "multiprocess_reader"]


# Fluid 1.8's helpers listing a program's parameters / persistable variables
def get_program_parameter(program):
    """Every parameter of `program` (all blocks), as Fluid 1.8's fluid.io does."""
    return [v for v in program.list_vars() if is_parameter(v)]


def get_program_persistable_vars(program):
    """Every persistable variable of `program` that a save would write."""
    return [v for v in program.list_vars() if is_persistable(v)]


__all__ += ["get_program_parameter", "get_program_persistable_vars"]

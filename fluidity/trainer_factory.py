"""Fluid's `fluid.trainer_factory`: the trainer (fluidity/trainer_desc.py) and device worker
(fluidity/device_worker.py) a program's fleet options ask for.

Without options: a MultiTrainer of Hogwild workers. With them (`program._fleet_opt`), the
classes they name ("trainer", "device_worker") and the dump and fleet settings they carry,
each written into the TrainerDesc through its trainer's setter.
"""
from . import device_worker as _workers
from . import trainer_desc as _trainers
from .executor.fetch_handler import FetchHandler, FetchHandlerMonitor  # noqa: F401

__all__ = ["TrainerFactory", "FetchHandler", "FetchHandlerMonitor"]

_TRAINERS = {name: getattr(_trainers, name) for name in _trainers.__all__}
_WORKERS = {name: getattr(_workers, name) for name in _workers.__all__}

# option -> the trainer's setter, for every options dict / only with a fleet description
_DUMP_OPTIONS = (("dump_slot", "_set_dump_slot"), ("mpi_rank", "_set_mpi_rank"),
                 ("mpi_size", "_set_mpi_size"), ("dump_fields", "_set_dump_fields"),
                 ("dump_fields_path", "_set_dump_fields_path"),
                 ("dump_file_num", "_set_dump_file_num"),
                 ("dump_converter", "_set_dump_converter"), ("dump_param", "_set_dump_param"))
_FLEET_OPTIONS = (("use_cvm", "_set_use_cvm"), ("no_cvm", "_set_no_cvm"),
                  ("scale_datanorm", "_set_scale_datanorm"),
                  ("adjust_ins_weight", "_set_adjust_ins_weight"),
                  ("copy_table", "_set_copy_table_config"),
                  ("check_nan_var_names", "_set_check_nan_var_names"),
                  ("loss_names", "_set_loss_names"))


def _named(table, name, what):
    cls = table.get(name)
    if cls is None:
        raise ValueError(f"unknown {what} '{name}' (one of {sorted(table)})")
    return cls()


def _apply(trainer, opt_info, options):
    for key, setter in options:
        if opt_info.get(key) is not None:
            getattr(trainer, setter)(opt_info[key])


class TrainerFactory:
    def _create_trainer(self, opt_info=None):
        if not opt_info:
            trainer = _trainers.MultiTrainer()
            trainer._set_device_worker(_workers.Hogwild())
            return trainer
        trainer = _named(_TRAINERS, opt_info["trainer"], "trainer")
        worker = _named(_WORKERS, opt_info["device_worker"], "device worker")
        _apply(trainer, opt_info, _DUMP_OPTIONS)
        if "fleet_desc" in opt_info:
            worker._set_fleet_desc(opt_info["fleet_desc"])
            trainer._set_fleet_desc(opt_info["fleet_desc"])
            _apply(trainer, opt_info, _FLEET_OPTIONS)
        trainer._set_device_worker(worker)
        return trainer

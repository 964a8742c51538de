"""Fluid's `fluid.trainer_desc`: the TrainerDesc of a dataset-driven run, built as data.

A trainer object holds one `TrainerDesc` message (`proto_desc`, fluidity/proto/
trainer_desc.proto, wire-compatible with Fluid 1.8's) and the Python-side choices that go
into it: the device worker (fluidity/device_worker.py), the program, the fleet description.
`_gen_trainer_desc()` writes the trainer's class name and has the device worker write its
part; `_desc()` is the serialized message, `str()` its text form. Fluidity's own
`train_from_dataset` runs Hogwild workers without this message; programs and tools that
build, inspect or hand one on (fleet configurations, dump settings) get Fluid's message.
"""
import multiprocessing

from google.protobuf import text_format

from .proto import trainer_desc_pb2

__all__ = ["TrainerDesc", "MultiTrainer", "DistMultiTrainer", "PipelineTrainer"]

# setter -> the scalar field it writes (Fluid's `_set_*` methods that store one value)
_SCALAR_SETTERS = {
    "_set_debug": "debug", "_set_thread": "thread_num", "_set_use_cvm": "use_cvm",
    "_set_no_cvm": "no_cvm", "_set_scale_datanorm": "scale_datanorm",
    "_set_dump_slot": "dump_slot", "_set_mpi_rank": "mpi_rank", "_set_mpi_size": "mpi_size",
    "_set_dump_fields_path": "dump_fields_path", "_set_dump_file_num": "dump_file_num",
    "_set_dump_converter": "dump_converter", "_set_thread_barrier": "thread_barrier",
}
# setter -> the repeated string field it appends to
_LIST_SETTERS = {
    "_set_dump_fields": "dump_fields", "_set_dump_param": "dump_param",
    "_set_check_nan_var_names": "check_nan_var_names", "_set_loss_names": "loss_names",
}
# the defaults of Fluid's optional setter arguments
_SETTER_DEFAULTS = {"_set_use_cvm": False, "_set_no_cvm": False, "_set_scale_datanorm": -1}

# AdjustInsWeightConfig: key of the config dict -> default
_ADJUST_INS_WEIGHT = {"need_adjust": False, "nid_slot": "", "nid_adjw_threshold": 0.0,
                      "nid_adjw_ratio": 0.0, "ins_weight_slot": ""}
# CopyTableConfig: the (source, destination) lists that must pair up, and the flags
_COPY_TABLE_PAIRS = (("src_sparse_tables", "dest_sparse_tables"),
                     ("src_dense_tables", "dest_dense_tables"),
                     ("src_var_list", "dest_var_list"))
_COPY_TABLE_FLAGS = {"need_copy": False, "batch_num": 100, "dense_pull_after_copy": True,
                     "enable_dependency": False, "sparse_copy_by_feasign": True}


_NO_DEFAULT = object()


def _scalar_setter(field, default):
    if default is _NO_DEFAULT:
        def setter(self, value):
            setattr(self.proto_desc, field, value)
    else:
        def setter(self, value=default):
            setattr(self.proto_desc, field, value)
    setter.__doc__ = f"Set TrainerDesc.{field}."
    return setter


def _list_setter(field):
    def setter(self, values):
        getattr(self.proto_desc, field).extend(values)
    setter.__doc__ = f"Append to TrainerDesc.{field}."
    return setter


def _as_list(value):
    return value if isinstance(value, list) else [value]


class TrainerDesc:
    """The base trainer: a TrainerDesc message whose thread_num starts at the CPU count."""

    def __init__(self):
        self.proto_desc = trainer_desc_pb2.TrainerDesc()
        self.proto_desc.thread_num = multiprocessing.cpu_count()
        self._fleet_desc = None
        self._device_worker = None
        self._program = None
        self._infer = False

    def _set_fetch_var_and_info(self, fetch_vars, fetch_info, print_period):
        """Print `fetch_vars` (Variables) every `print_period` batches, each with its format
        string of `fetch_info`."""
        if len(fetch_info) < len(fetch_vars):
            raise ValueError(f"fetch_info has {len(fetch_info)} entries for "
                             f"{len(fetch_vars)} fetch_vars")
        config = self.proto_desc.fetch_config
        for var, info in zip(fetch_vars, fetch_info):
            config.fetch_var_names.append(var.name)
            config.fetch_var_str_format.append(info)
        config.print_period = print_period

    def _set_device_worker(self, device_worker):
        self._device_worker = device_worker

    def _set_infer(self, infer):
        self._infer = infer

    def _set_fleet_desc(self, fleet_desc):
        self._fleet_desc = fleet_desc

    def _set_program(self, program):
        self._program = program

    def _set_adjust_ins_weight(self, config_dict):
        config = self.proto_desc.adjust_ins_weight_config
        for key, default in _ADJUST_INS_WEIGHT.items():
            setattr(config, key, config_dict.get(key, default))

    def _set_copy_table_config(self, config_dict):
        """CopyTableConfig from a dict: each source list pairs with its destination list
        (ValueError when their lengths differ); `dependency_map` {table: [one table]}."""
        config = self.proto_desc.copy_table_config
        for key in ("need_copy", "batch_num"):
            setattr(config, key, config_dict.get(key, _COPY_TABLE_FLAGS[key]))
        for src_key, dest_key in _COPY_TABLE_PAIRS:
            src = _as_list(config_dict.get(src_key, []))
            dest = _as_list(config_dict.get(dest_key, []))
            if len(src) != len(dest):
                raise ValueError(f"len({src_key}) != len({dest_key}), {len(src)} vs "
                                 f"{len(dest)}")
            getattr(config, src_key).extend(src)
            getattr(config, dest_key).extend(dest)
        for key, values in config_dict.get("dependency_map", {}).items():
            values = _as_list(values)
            if len(values) != 1:
                raise ValueError(f"dependency len {len(values)} != 1")
            entry = config.table_denpendency_map.add()
            entry.key = key
            entry.values.extend(values)
        for key in ("dense_pull_after_copy", "enable_dependency", "sparse_copy_by_feasign"):
            setattr(config, key, config_dict.get(key, _COPY_TABLE_FLAGS[key]))

    def _gen_trainer_desc(self):
        """Write the trainer's part of proto_desc (the base trainer has none)."""

    def _desc(self):
        return self.proto_desc.SerializeToString()

    def __str__(self):
        return text_format.MessageToString(self.proto_desc)


for _name, _field in _SCALAR_SETTERS.items():
    setattr(TrainerDesc, _name, _scalar_setter(_field, _SETTER_DEFAULTS.get(_name, _NO_DEFAULT)))
for _name, _field in _LIST_SETTERS.items():
    setattr(TrainerDesc, _name, _list_setter(_field))


class _WorkerTrainer(TrainerDesc):
    """A trainer that names itself and has its device worker write the worker part."""
    _class_name = None
    _needs_program = True

    def _gen_trainer_desc(self):
        super()._gen_trainer_desc()
        self.proto_desc.class_name = self._class_name
        if self._needs_program and self._program is None:
            raise RuntimeError(f"None Program: {self._class_name} needs the program it "
                               f"runs (_set_program)")
        if self._device_worker is None:
            raise RuntimeError(f"{self._class_name}: no device worker set "
                               f"(_set_device_worker)")
        self._device_worker._set_infer(self._infer)
        self._device_worker._set_program(self._program)
        self._device_worker._gen_worker_desc(self.proto_desc)


class MultiTrainer(_WorkerTrainer):
    """Threads of one process, each a device worker over its share of the data."""
    _class_name = "MultiTrainer"
    _needs_program = False


class DistMultiTrainer(_WorkerTrainer):
    """MultiTrainer whose workers talk to parameter servers (fleet)."""
    _class_name = "DistMultiTrainer"


class PipelineTrainer(_WorkerTrainer):
    """Sections of a program in a pipeline (the Section device worker)."""
    _class_name = "PipelineTrainer"

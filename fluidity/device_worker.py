"""Fluid's `fluid.device_worker`: the device workers a trainer (fluidity/trainer_desc.py)
describes, each writing its part of the TrainerDesc message.

* Hogwild: lock-free threads over shared parameters (what Fluidity's train_from_dataset
  runs); with a fleet configuration on the program, also the parameter-server tables.
* DownpourSGD / DownpourSGDOPT: workers of a Downpour parameter server (fleet's PSLib
  mode): sparse tables pulled and pushed by slot, dense tables by variable.
* Section: one stage of a pipeline (`program._pipeline_opt`).

The fleet parts read the program's `_fleet_opt` dict as Fluid's do: `program_configs`
({program id: {"push_sparse", "push_dense", "pull_sparse", "pull_dense": [table ids]}}),
`program_id_to_worker` (objects whose `get_desc()` lists `sparse_table` with table_id,
slot_key, slot_value, slot_gradient and `dense_table` with table_id, dense_variable_name,
dense_gradient_variable_name, plus `skip_op`), `stat_var_names`, `use_cvm` / `no_cvm`, and
the fleet description (`server_param.downpour_server_param.downpour_table_param[i]
.accessor.fea_dim`). A program id is `str(id(program))`, as Fluid keys them.
"""
from .core.place import CPUPlace, CUDAPinnedPlace, CUDAPlace

__all__ = ["DeviceWorker", "Hogwild", "DownpourSGD", "DownpourSGDOPT", "Section"]


class DeviceWorker:
    """A device worker: set its program (and inference flag), then `_gen_worker_desc`."""

    def __init__(self):
        self._program = None
        self._infer = None
        self._fleet_desc = None

    def _set_infer(self, infer=False):
        self._infer = infer

    def _set_fleet_desc(self, fleet_desc):
        self._fleet_desc = fleet_desc

    def _set_program(self, program):
        self._program = program

    def _gen_worker_desc(self, trainer_desc):
        raise NotImplementedError("DeviceWorker does not implement gen_worker_desc, please "
                                  "use Hogwild or DownpourSGD, etc.")

    def _opt_info(self):
        if self._program is None:
            raise RuntimeError(f"{type(self).__name__}: the program of the device worker is "
                               f"not configured (_set_program)")
        return getattr(self._program, "_fleet_opt", None)


def _sparse_dims(fea_dim, opt_info):
    """(emb_dim, fea_dim) of a Downpour sparse table: with CVM kept (use_cvm or no_cvm) the
    embedding is the whole feature; otherwise the feature is the embedding plus show and
    click."""
    if opt_info["use_cvm"] or opt_info.get("no_cvm") is True:
        return fea_dim, fea_dim
    return fea_dim - 2, fea_dim


def _fill_tables(trainer_desc, program, opt_info, fleet_desc, sparse_dims, label_var_name):
    """The parameter-server part shared by the fleet workers: this program's table ids,
    the dense tables pulled (pull_dense_param) and pushed, the sparse tables by slot.
    Returns (the worker's desc, the last sparse table written or None)."""
    program_id = str(id(program))
    downpour = trainer_desc.downpour_param
    dense_ids = set()
    config = opt_info["program_configs"].get(program_id)
    if config is not None:
        pc = downpour.program_config.add()
        pc.program_id = program_id
        for key, field in (("push_sparse", "push_sparse_table_id"),
                           ("push_dense", "push_dense_table_id"),
                           ("pull_sparse", "pull_sparse_table_id"),
                           ("pull_dense", "pull_dense_table_id")):
            getattr(pc, field).extend(config[key])
            if key.endswith("dense"):
                dense_ids.update(config[key])
    pull = trainer_desc.pull_dense_param
    pull.device_num = trainer_desc.thread_num
    workers = opt_info.get("program_id_to_worker")
    if workers is None:
        raise ValueError("opt_info must have program_id_to_worker")
    if workers.get(program_id) is None:
        raise ValueError(f"{program_id} not found in program_id_to_worker")
    worker = workers[program_id].get_desc()
    dense = [t for t in worker.dense_table if t.table_id in dense_ids]
    for t in dense:
        table = pull.dense_table.add()
        table.dense_value_name.extend(t.dense_variable_name)
        table.table_id = t.table_id
    table = None
    for i, t in enumerate(worker.sparse_table):
        table = downpour.sparse_table.add()
        table.table_id = t.table_id
        table.sparse_key_name.extend(t.slot_key)
        table.sparse_value_name.extend(t.slot_value)
        table.sparse_grad_name.extend(t.slot_gradient)
        fea_dim = fleet_desc.server_param.downpour_server_param.downpour_table_param[
            i].accessor.fea_dim
        table.emb_dim, table.fea_dim = sparse_dims(fea_dim, opt_info)
        table.label_var_name = label_var_name
    for name in opt_info.get("stat_var_names") or ():
        downpour.stat_var_names.append(name)
    for t in dense:
        table_d = downpour.dense_table.add()
        table_d.table_id = t.table_id
        table_d.dense_value_name.extend(t.dense_variable_name)
        table_d.dense_grad_name.extend(t.dense_gradient_variable_name)
    return worker, table


class Hogwild(DeviceWorker):
    """Hogwild SGD: each thread runs the whole program on its batches, updating the shared
    parameters without locks."""

    def _gen_worker_desc(self, trainer_desc):
        trainer_desc.device_worker_name = "HogwildWorker"
        hogwild = trainer_desc.hogwild_param
        if self._infer:   # an inference program is fed by the data feed, not a feed op
            hogwild.skip_ops.append("feed")
        opt_info = self._opt_info()
        if not opt_info or "fleet_desc" not in opt_info:
            return
        worker, _ = _fill_tables(trainer_desc, self._program, opt_info, self._fleet_desc,
                                 lambda fea_dim, _opt: (-1, fea_dim), "")
        for name in opt_info.get("stat_var_names") or ():
            hogwild.stat_var_names.append(name)
        hogwild.skip_ops.extend(worker.skip_op)
        if self._infer:
            hogwild.skip_ops.extend(["push_sparse", "push_sparse_v2", "push_dense"])


class DownpourSGD(DeviceWorker):
    """A Downpour parameter-server worker: pulls the sparse rows and dense tables it needs,
    runs forward and backward, pushes the gradients."""
    _worker_name = "DownpourWorker"

    def _gen_worker_desc(self, trainer_desc):
        opt_info = self._opt_info()
        if not opt_info:
            raise ValueError(f"{type(self).__name__}: the program has no fleet configuration "
                             f"(program._fleet_opt)")
        trainer_desc.device_worker_name = self._worker_name
        worker, last = _fill_tables(trainer_desc, self._program, opt_info, self._fleet_desc,
                                    _sparse_dims, "click")
        self._mark_tables(opt_info, last)
        downpour = trainer_desc.downpour_param
        downpour.skip_ops.extend(worker.skip_op)
        if self._infer:
            downpour.push_dense = False
            downpour.push_sparse = False

    def _mark_tables(self, opt_info, table):
        """DownpourSGDOPT's local and asynchronous tables (none here)."""


class DownpourSGDOPT(DownpourSGD):
    """DownpourSGD whose last sparse table may be local (`local_tables`) or pulled
    asynchronously (`async_tables`), as Fluid 1.8 marks it."""
    _worker_name = "DownpourWorkerOpt"

    def _mark_tables(self, opt_info, table):
        if table is None:
            return
        if table.table_id in opt_info.get("local_tables", ()):
            table.is_local = True
        if table.table_id in opt_info.get("async_tables", ()):
            table.is_async = True


# a section's place -> SectionConfig.Place
_SECTION_PLACES = ((CUDAPinnedPlace, "CUDAPinnedPlace"), (CUDAPlace, "CUDAPlace"),
                   (CPUPlace, "CPUPlace"))


class Section(DeviceWorker):
    """One stage of a pipeline: its program, place, concurrency and the variables it takes
    from the stage before and hands to the next (`program._pipeline_opt`)."""

    def _gen_worker_desc(self, trainer_desc):
        trainer_desc.device_worker_name = "SectionWorker"
        opt = getattr(self._program, "_pipeline_opt", None)
        if not opt:
            raise ValueError("Section: the program has no pipeline configuration "
                             "(program._pipeline_opt)")
        param = trainer_desc.section_param
        param.queue_size = opt["queue_size"]
        param.sync_steps = opt["sync_steps"]
        param.start_cpu_core_id = opt["start_cpu_core_id"]
        param.param_need_sync.extend(opt["param_need_sync"])
        for i, section in enumerate(opt["section_program_list"]):
            cfg = param.section_config.add()
            cfg.program_desc.CopyFrom(section["program"].desc)
            place = opt["place_list"][i]
            kind = next((name for cls, name in _SECTION_PLACES if isinstance(place, cls)), None)
            if kind is None:
                raise NotImplementedError("SectionWorker only supports CPUPlace, CUDAPlace and "
                                          "CUDAPinnedPlace now.")
            cfg.place = getattr(cfg, kind)
            cfg.concurrency = opt["concurrency_list"][i]
            cfg.section_in_var_names.extend(section["input_set"])
            cfg.section_out_var_names.extend(section["output_set"])


class DeviceWorkerFactory:
    """Fluid's factory: a worker by its type name ("hogwild", "section", ...)."""

    def _create_device_worker(self, worker_type):
        cls = globals().get(worker_type.capitalize())
        if not (isinstance(cls, type) and issubclass(cls, DeviceWorker)):
            raise ValueError(f"unknown device worker type '{worker_type}'")
        return cls()

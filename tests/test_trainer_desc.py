"""fluid.trainer_desc / fluid.device_worker / fluid.trainer_factory: TrainerDesc messages
built as Fluid 1.8 builds them, serialized and read back."""
from types import SimpleNamespace as NS

import pytest
from google.protobuf import text_format

import fluidity as fluid
from fluidity.proto import trainer_desc_pb2


def _net():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [1], dtype="int64")
        emb = fluid.layers.embedding(x, size=[10, 2], is_distributed=True)
        loss = fluid.layers.mean(fluid.layers.fc(emb, 1))
    return main, loss


def test_settings_are_written_and_read_back():
    t = fluid.trainer_desc.TrainerDesc()
    assert t.proto_desc.thread_num >= 1 and t.proto_desc.mpi_rank == -1
    assert t.proto_desc.dump_file_num == 16 and t.proto_desc.scale_datanorm == -1
    t._set_dump_fields(["a", "b"])
    t._set_mpi_rank(1)
    t._set_dump_fields_path("path")
    t._set_thread(3)
    t._set_use_cvm()
    t._set_loss_names(["loss"])
    t._set_adjust_ins_weight({"need_adjust": True, "nid_slot": "6002"})
    main, loss = _net()
    t._set_fetch_var_and_info([loss], ["loss: "], 5)
    back = trainer_desc_pb2.TrainerDesc.FromString(t._desc())
    assert list(back.dump_fields) == ["a", "b"] and back.mpi_rank == 1
    assert back.dump_fields_path == "path" and back.thread_num == 3
    assert back.use_cvm is False and list(back.loss_names) == ["loss"]
    assert back.adjust_ins_weight_config.need_adjust
    assert back.adjust_ins_weight_config.nid_slot == "6002"
    assert list(back.fetch_config.fetch_var_names) == [loss.name]
    assert back.fetch_config.print_period == 5
    assert text_format.Parse(str(t), trainer_desc_pb2.TrainerDesc()) == back


def test_copy_table_config_pairs_its_lists():
    t = fluid.trainer_desc.TrainerDesc()
    t._set_copy_table_config({"need_copy": True, "src_sparse_tables": 0,
                              "dest_sparse_tables": [1], "dependency_map": {2: 3}})
    c = t.proto_desc.copy_table_config
    assert c.need_copy and list(c.src_sparse_tables) == [0] and c.dense_pull_after_copy
    assert [(m.key, list(m.values)) for m in c.table_denpendency_map] == [(2, [3])]
    with pytest.raises(ValueError, match="src_dense_tables"):
        t._set_copy_table_config({"src_dense_tables": [1, 2], "dest_dense_tables": [3]})


def test_factory_default_is_multitrainer_of_hogwild():
    main, _ = _net()
    trainer = fluid.trainer_factory.TrainerFactory()._create_trainer(None)
    assert isinstance(trainer, fluid.trainer_desc.MultiTrainer)
    trainer._set_program(main)
    trainer._set_infer(True)
    trainer._gen_trainer_desc()
    d = trainer.proto_desc
    assert (d.class_name, d.device_worker_name) == ("MultiTrainer", "HogwildWorker")
    assert list(d.hogwild_param.skip_ops) == ["feed"]


def _fleet(main):
    """A fleet configuration as fleet's PSLib mode leaves on a program (duck-typed)."""
    pid = str(id(main))
    dense = NS(table_id=1, dense_variable_name=["fc_0.w_0"],
               dense_gradient_variable_name=["fc_0.w_0@GRAD"])
    sparse = NS(table_id=0, slot_key=["x"], slot_value=["emb"], slot_gradient=["emb@GRAD"])
    worker = NS(get_desc=lambda: NS(dense_table=[dense], sparse_table=[sparse],
                                    skip_op=["lookup_table"]))
    table = NS(accessor=NS(fea_dim=11))
    fleet_desc = NS(server_param=NS(downpour_server_param=NS(downpour_table_param=[table])))
    return {"trainer": "DistMultiTrainer", "device_worker": "DownpourSGD",
            "fleet_desc": fleet_desc, "use_cvm": False, "stat_var_names": ["s"],
            "dump_fields": ["emb"], "program_id_to_worker": {pid: worker},
            "program_configs": {pid: {"pull_sparse": [0], "push_sparse": [0],
                                      "pull_dense": [1], "push_dense": [1]}}}


def test_downpour_worker_desc_from_the_programs_fleet_options():
    main, _ = _net()
    main._fleet_opt = _fleet(main)
    trainer = fluid.trainer_factory.TrainerFactory()._create_trainer(main._fleet_opt)
    trainer._set_program(main)
    trainer._gen_trainer_desc()
    d = trainer_desc_pb2.TrainerDesc.FromString(trainer._desc())
    assert (d.class_name, d.device_worker_name) == ("DistMultiTrainer", "DownpourWorker")
    assert list(d.dump_fields) == ["emb"]
    pc, = d.downpour_param.program_config
    assert pc.program_id == str(id(main)) and list(pc.pull_dense_table_id) == [1]
    sparse, = d.downpour_param.sparse_table
    assert (sparse.emb_dim, sparse.fea_dim, sparse.label_var_name) == (9, 11, "click")
    assert list(sparse.sparse_grad_name) == ["emb@GRAD"]
    dense, = d.downpour_param.dense_table
    assert list(dense.dense_grad_name) == ["fc_0.w_0@GRAD"]
    assert d.pull_dense_param.device_num == d.thread_num
    assert list(d.downpour_param.skip_ops) == ["lookup_table"]
    assert list(d.downpour_param.stat_var_names) == ["s"]


def test_opt_worker_marks_local_tables_and_errors_name_what_is_missing():
    main, _ = _net()
    opt = _fleet(main)
    opt.update(device_worker="DownpourSGDOPT", use_cvm=True, local_tables=[0])
    main._fleet_opt = opt
    trainer = fluid.trainer_factory.TrainerFactory()._create_trainer(opt)
    trainer._set_program(main)
    trainer._gen_trainer_desc()
    sparse, = trainer.proto_desc.downpour_param.sparse_table
    assert trainer.proto_desc.device_worker_name == "DownpourWorkerOpt"
    assert sparse.is_local and (sparse.emb_dim, sparse.fea_dim) == (11, 11)
    del opt["program_id_to_worker"]
    missing = fluid.trainer_factory.TrainerFactory()._create_trainer(opt)
    missing._set_program(main)
    with pytest.raises(ValueError, match="program_id_to_worker"):
        missing._gen_trainer_desc()
    no_program = fluid.trainer_factory.TrainerFactory()._create_trainer(_fleet(main))
    with pytest.raises(RuntimeError, match="None Program"):
        no_program._gen_trainer_desc()
    with pytest.raises(ValueError, match="unknown trainer"):
        fluid.trainer_factory.TrainerFactory()._create_trainer(
            {"trainer": "Nope", "device_worker": "Hogwild"})


def test_section_worker_describes_each_stage():
    main, _ = _net()
    main._pipeline_opt = {
        "queue_size": 2, "sync_steps": 3, "start_cpu_core_id": 0, "param_need_sync": ["w"],
        "section_program_list": [{"program": main, "input_set": ["x"], "output_set": ["y"]}],
        "place_list": [fluid.CPUPlace()], "concurrency_list": [2]}
    trainer = fluid.trainer_desc.PipelineTrainer()
    trainer._set_device_worker(fluid.device_worker.Section())
    trainer._set_program(main)
    trainer._gen_trainer_desc()
    param = trainer_desc_pb2.TrainerDesc.FromString(trainer._desc()).section_param
    cfg, = param.section_config
    assert (param.queue_size, param.sync_steps, cfg.concurrency) == (2, 3, 2)
    assert cfg.place == cfg.CPUPlace and list(cfg.section_out_var_names) == ["y"]
    assert len(cfg.program_desc.blocks[0].ops) == len(main.global_block().ops)

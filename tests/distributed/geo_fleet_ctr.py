"""A CTR-DNN trained GEO-SGD style through Fluid 1.6's fleet API, written as a PaddleRec
user writes it (role maker from the environment, strategy factory, distributed_optimizer,
init_server/run_server, init_worker/train_from_dataset/stop_worker). Run by the launcher:

    fluidity launch --server_num 2 --worker_num 2 tests/distributed/geo_fleet_ctr.py OUT_DIR

Every process generates the same small data set (seeded); trainer k trains every 2nd file
and writes OUT_DIR/trainer<k>.json (its mean losses, worker mode, syncs)."""
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import fluidity as fluid  # noqa: E402
from dist_ctr import make_data  # noqa: E402
from fluidity.incubate.fleet.base import role_maker  # noqa: E402
from fluidity.incubate.fleet.parameter_server.distribute_transpiler import fleet  # noqa: E402
from fluidity.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy \
    import StrategyFactory  # noqa: E402


def ctr_dnn(sparse_slots, dense_dim, vocab):
    dense = fluid.layers.data("dense_input", [dense_dim])
    ids = [fluid.layers.data(s, [1], dtype="int64", lod_level=1) for s in sparse_slots]
    label = fluid.layers.data("click", [1], dtype="int64")
    embs = [fluid.layers.sequence_pool(fluid.layers.embedding(
        i, [vocab, 8], is_sparse=True, param_attr=fluid.ParamAttr(
            name="SparseFeatFactors", initializer=fluid.initializer.Uniform(-0.01, 0.01))),
        "sum") for i in ids]
    h = fluid.layers.fc(fluid.layers.concat(embs + [dense], axis=1), 64, act="relu")
    predict = fluid.layers.fc(h, 2, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(predict, label))
    return [dense] + ids + [label], loss


def main():
    out_dir = sys.argv[1]
    fleet.init(role_maker.PaddleCloudRoleMaker())
    with tempfile.TemporaryDirectory() as d:
        train, _test = make_data(d, 4000, 4, test_lines=200)
        with open(train["model"]) as f:
            model = json.load(f)
        fluid.default_main_program().random_seed = 7
        fluid.default_startup_program().random_seed = 7
        use_vars, loss = ctr_dnn(model["sparse_slots"], len(model["dense_weights"]),
                                 model["vocab"])
        strategy = StrategyFactory.create_geo_strategy(8)
        optimizer = fleet.distributed_optimizer(fluid.optimizer.SGD(0.05), strategy)
        optimizer.minimize(loss)
        if fleet.is_server():
            fleet.init_server()
            fleet.run_server()
            return 0
        exe = fluid.Executor(fluid.CPUPlace())
        fleet.init_worker()
        exe.run(fleet.startup_program)
        dataset = fluid.DatasetFactory().create_dataset("QueueDataset")
        dataset.set_use_var(use_vars)
        dataset.set_batch_size(64)
        dataset.set_thread(2)
        dataset.set_filelist(train["files"][fleet.worker_index()::fleet.worker_num()])
        losses, modes = [], []
        for _ in range(2):
            r = exe.train_from_dataset(program=fleet.main_program, dataset=dataset,
                                       fetch_list=[loss], print_period=20)
            losses.append(r[0])
            modes.append(r.mode)
        syncs = fleet._communicator.stats.syncs
        fleet.stop_worker()
        with open(os.path.join(out_dir, f"trainer{fleet.worker_index()}.json"), "w") as f:
            json.dump({"losses": losses, "modes": modes, "syncs": syncs}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())

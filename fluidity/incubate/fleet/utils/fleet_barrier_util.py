"""Fluid 1.8's `fleet.utils.fleet_barrier_util`: trainers meet at an HDFS directory between
epochs (each puts `ready.<epoch>.<trainer_id>.done` there and waits until the count is a
multiple of the trainer count), through the Hadoop client of $HADOOP_HOME with $FS_NAME and
$FS_UGI (contrib.utils.HDFSClient), as Fluid's. Without a Hadoop client the listing is empty and the
barrier passes at once, as in Fluid."""
import os
import time

from ....contrib.utils.hdfs_utils import HDFSClient
from ..parameter_server.distribute_transpiler import fleet

__all__ = ["check_all_trainers_ready"]

POLL_S = 10


def check_all_trainers_ready(ready_path, epoch, timeout_s=None):
    """Wait until every trainer of `fleet` has marked epoch `epoch` ready under `ready_path`
    (`timeout_s`, not in Fluid: raise TimeoutError after that many seconds instead of
    waiting for ever for a trainer that died)."""
    trainer_num, trainer_id = fleet.worker_num(), fleet.worker_index()
    configs = {"fs.default.name": os.getenv("FS_NAME"), "hadoop.job.ugi": os.getenv("FS_UGI")}
    node_ready = f"ready.{epoch}.{trainer_id}.done"
    with open(node_ready, "w"):
        pass
    client = HDFSClient(os.getenv("HADOOP_HOME"), configs)
    if not client.is_dir(ready_path):
        client.makedirs(ready_path)
    client.upload(hdfs_path=ready_path, local_path=node_ready, overwrite=True, retry_times=0)
    print(f"PUT {node_ready} ON HDFS {ready_path} OK")
    start = time.monotonic()
    while True:
        ready_num = len(client.ls(ready_path))
        print(f"have {trainer_num - ready_num % trainer_num} trainers need to be ready")
        if ready_num % trainer_num == 0:
            break
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise TimeoutError(f"check_all_trainers_ready: {ready_num % trainer_num} of "
                               f"{trainer_num} trainers ready under {ready_path} after "
                               f"{timeout_s} s")
        time.sleep(POLL_S)
    print("All trainers are ready, continue training")

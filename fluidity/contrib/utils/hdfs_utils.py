"""`fluid.contrib.utils.hdfs_utils`: Fluid 1.x's first HDFS client. It is fleet.utils.hdfs's
(the same `hadoop fs` commands) but moves one file at a time: `upload(hdfs_path, local_path)`
puts the file `local_path` into the directory `hdfs_path` (made when missing; an existing
file of that name is replaced only with overwrite=True), `download(hdfs_path, local_path)`
gets the file `hdfs_path` into the directory `local_path`. `multi_download` /
`multi_upload` move a tree, several files at a time (on threads: each transfer is a child
process already), keeping the paths below the roots."""
import logging
import os
from concurrent.futures import ThreadPoolExecutor

from ...incubate.fleet.utils import hdfs as _fleet_hdfs

__all__ = ["HDFSClient", "multi_download", "multi_upload"]

_logger = logging.getLogger("fluidity.hdfs")


class HDFSClient(_fleet_hdfs.HDFSClient):

    def upload(self, hdfs_path, local_path, overwrite=False, retry_times=5):
        """True when the file `local_path` is now in `hdfs_path`."""
        if hdfs_path is None or local_path is None or not os.path.exists(local_path):
            raise ValueError(f"HDFSClient.upload: local path {local_path!r} does not exist")
        if os.path.isdir(local_path):
            _logger.warning("The Local path: %s is dir and I will support it later, return",
                            local_path)
            return False
        target = f"{hdfs_path.rstrip('/')}/{os.path.basename(local_path)}"
        if not self.is_exist(hdfs_path):
            self.makedirs(hdfs_path)
        elif self.is_exist(target):
            if not overwrite:
                _logger.error("The HDFS path: %s is exist and overwrite is False, return",
                              target)
                return False
            self.delete(target)
        code, _, _ = self._run(["-put", local_path, hdfs_path], retry_times)
        if code:
            _logger.error("Put local path: %s to HDFS path: %s failed", local_path, hdfs_path)
        return code == 0

    def download(self, hdfs_path, local_path, overwrite=False, unzip=False):
        """True when the file `hdfs_path` is now in the directory `local_path`."""
        if not self.is_exist(hdfs_path):
            print(f"HDFS path: {hdfs_path} do not exist")
            return False
        local_file = os.path.join(local_path, os.path.basename(hdfs_path.rstrip("/")))
        if os.path.exists(local_file):
            if not overwrite:
                _logger.error("The Local path: %s is exist and overwrite is False, return",
                              local_file)
                return False
            os.remove(local_file)
        self.make_local_dirs(local_path)
        code, _, _ = self._run(["-get", hdfs_path, local_path])
        if code:
            _logger.error("Get local path: %s from HDFS path: %s failed", local_path,
                          hdfs_path)
        return code == 0

    def lsr(self, hdfs_path, only_file=True, sort=True):
        """The paths under `hdfs_path`, recursively (files only by default), oldest first
        when `sort`."""
        if not self.is_exist(hdfs_path):
            return []
        code, out, _ = self._run(["-lsr", hdfs_path], retry_times=1)
        if code:
            _logger.error("HDFS list all files: %s failed", hdfs_path)
            return []
        rows = [(f[7], f[5] + " " + f[6]) for _, f in self._listing(out)
                if not (only_file and f[0].startswith("d"))]
        if sort:
            rows.sort(key=lambda r: r[1])
        return [r[0] for r in rows]


def _check_client(client):
    if not isinstance(client, _fleet_hdfs.HDFSClient):
        raise TypeError(f"client must be an HDFSClient, got {type(client).__name__}")


def _below(path, root):
    """`path`'s directory relative to `root` ("" for root itself)."""
    rel = os.path.relpath(os.path.dirname(path), root)
    return "" if rel == os.curdir else rel


def multi_download(client, hdfs_path, local_path, trainer_id, trainers, multi_processes=5):
    """Download trainer `trainer_id`'s share (every `trainers`-th file, in time order) of
    the files under `hdfs_path` into `local_path`, `multi_processes` at a time; returns the
    local paths of that share."""
    _check_client(client)
    client.make_local_dirs(local_path)
    files = client.lsr(hdfs_path, sort=True)[trainer_id::trainers]
    _logger.info("Get %d files to download from %s", len(files), hdfs_path)

    def get(path):
        return client.download(path, os.path.join(local_path, _below(path, hdfs_path)))
    with ThreadPoolExecutor(max(1, int(multi_processes))) as pool:
        list(pool.map(get, files))
    return [os.path.join(local_path, _below(f, hdfs_path), os.path.basename(f)) for f in files]


def multi_upload(client, hdfs_path, local_path, multi_processes=5, overwrite=False,
                 sync=True):
    """Upload every file under the directory `local_path` to the same place below
    `hdfs_path`, `multi_processes` at a time."""
    _check_client(client)
    if not os.path.isdir(local_path):
        _logger.info("there are nothing need to upload, exit")
        return
    files = [os.path.join(d, f) for d, _, names in os.walk(local_path) for f in sorted(names)]
    if not files:
        _logger.info("there are nothing need to upload, exit")
        return

    def put(path):
        rel = _below(path, local_path)
        return client.upload(f"{hdfs_path.rstrip('/')}/{rel}" if rel else hdfs_path, path,
                             overwrite, retry_times=5)
    with ThreadPoolExecutor(max(1, int(multi_processes))) as pool:
        list(pool.map(put, files))

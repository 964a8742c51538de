"""`fluid.contrib.utils.hdfs_utils`: Fluid 1.x's first HDFS client. It is fleet.utils.hdfs's
(the same `hadoop fs` commands) but moves one file at a time: `upload(hdfs_path, local_path)`
puts the file `local_path` into the directory `hdfs_path` (made when missing; an existing
file of that name is replaced only with overwrite=True), `download(hdfs_path, local_path)`
gets the file `hdfs_path` into the directory `local_path`."""
import logging
import os

from ...incubate.fleet.utils import hdfs as _fleet_hdfs

__all__ = ["HDFSClient"]

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

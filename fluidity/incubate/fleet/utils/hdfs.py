"""Fluid 1.8's HDFS client (`fleet.utils.hdfs.HDFSClient`, also `fluid.contrib.utils.HDFSClient`):
each call runs the Hadoop command line, `<hadoop_home>/bin/hadoop fs -D<key>=<value>... -<cmd>`,
as Fluid's does; Fluidity has no HDFS library of its own, so a machine without a Hadoop
client gets Fluid's answers for a failed command (False, [] or "", and an error logged).

Differences from Fluid, both for safety: the command is an argument list, never a shell line
(a path with spaces or `;` is a path); and a command whose program does not exist fails at
once instead of being retried (retrying cannot make it appear). Transfers run `multi_processes`
commands at a time on threads (each is a child process already).
"""
import logging
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

__all__ = ["HDFSClient"]

_logger = logging.getLogger("fluidity.hdfs")

RETRY_SLEEP_S = 3
_SPACES = re.compile(r"\s+")


class HDFSClient:
    """HDFS through the Hadoop client in `hadoop_home`, with `configs` (a dict, usually
    {"fs.default.name": ..., "hadoop.job.ugi": ...}) passed as -D options."""

    def __init__(self, hadoop_home, configs):
        if configs is not None and not isinstance(configs, dict):
            raise TypeError(f"HDFSClient: configs must be a dict, got {type(configs).__name__}")
        self.pre_commands = [f"{hadoop_home}/bin/hadoop", "fs"]
        self.pre_commands += [f"-D{k}={v}" for k, v in (configs or {}).items()]

    def _run(self, commands, retry_times=5):
        """(returncode, stdout, stderr) of the command, tried up to retry_times + 1 times."""
        cmd = self.pre_commands + [str(c) for c in commands]
        code, out, err = 1, "", ""
        for attempt in range(retry_times + 1):
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True)
            except OSError as e:      # no Hadoop client there: retrying cannot help
                _logger.error("HDFS: cannot run %s: %s", cmd[0], e)
                return 127, "", str(e)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
            _logger.info("Times: %d, Running command: %s. Return code: %d, Msg: %s", attempt,
                         " ".join(cmd), code, err)
            if code == 0:
                break
            if attempt < retry_times:
                time.sleep(RETRY_SLEEP_S)
        return code, out, err

    def cat(self, hdfs_path=None):
        if not self.is_file(hdfs_path):
            return ""
        code, out, _ = self._run(["-cat", hdfs_path], retry_times=1)
        if code:
            _logger.error("HDFS cat HDFS path: %s failed", hdfs_path)
            return ""
        return out.strip()

    def is_exist(self, hdfs_path=None):
        code, _, _ = self._run(["-test", "-e", hdfs_path], retry_times=1)
        if code:
            _logger.error("HDFS is_exist HDFS path: %s failed", hdfs_path)
        return code == 0

    def is_dir(self, hdfs_path=None):
        if not self.is_exist(hdfs_path):
            return False
        code, _, _ = self._run(["-test", "-d", hdfs_path], retry_times=1)
        return code == 0

    def is_file(self, hdfs_path=None):
        if not self.is_exist(hdfs_path):
            return False
        code, _, _ = self._run(["-test", "-d", hdfs_path], retry_times=1)
        return code != 0

    def delete(self, hdfs_path):
        """True when `hdfs_path` is gone (or was never there)."""
        if not self.is_exist(hdfs_path):
            _logger.warning("HDFS path: %s do not exist", hdfs_path)
            return True
        cmd = ["-rmr", hdfs_path] if self.is_dir(hdfs_path) else ["-rm", hdfs_path]
        code, _, _ = self._run(cmd, retry_times=0)
        if code:
            _logger.error("HDFS path: %s delete files failure", hdfs_path)
        return code == 0

    def rename(self, hdfs_src_path, hdfs_dst_path, overwrite=False):
        if hdfs_src_path is None or hdfs_dst_path is None:
            raise ValueError("HDFSClient.rename: both paths are needed")
        if not self.is_exist(hdfs_src_path):
            _logger.info("HDFS path do not exist: %s", hdfs_src_path)
        if self.is_exist(hdfs_dst_path) and not overwrite:
            _logger.error("HDFS path is exist: %s and overwrite=False", hdfs_dst_path)
        code, _, _ = self._run(["-mv", hdfs_src_path, hdfs_dst_path], retry_times=1)
        if code:
            _logger.error("HDFS rename path: %s to %s failed", hdfs_src_path, hdfs_dst_path)
        return code == 0

    @staticmethod
    def make_local_dirs(local_path):
        os.makedirs(local_path, exist_ok=True)

    def makedirs(self, hdfs_path):
        if hdfs_path is None:
            raise ValueError("HDFSClient.makedirs: hdfs_path is None")
        if self.is_exist(hdfs_path):
            _logger.error("HDFS path is exist: %s", hdfs_path)
            return None
        code, _, _ = self._run(["-mkdir", hdfs_path], retry_times=1)
        if code:
            _logger.error("HDFS mkdir path: %s failed", hdfs_path)
        return code == 0

    @staticmethod
    def _listing(out):
        """The 8-field lines of `hadoop fs -ls` output, split (the rest: headers); the
        last field, the path, may hold spaces."""
        for line_id, line in enumerate(out.strip().split("\n")):
            fields = _SPACES.split(line.strip(), maxsplit=7)
            if len(fields) == 8:
                yield line_id, fields

    def ls(self, hdfs_path):
        """The paths under `hdfs_path` ([] when it is not there)."""
        if hdfs_path is None:
            raise ValueError("HDFSClient.ls: hdfs_path is None")
        if not self.is_exist(hdfs_path):
            return []
        code, out, _ = self._run(["-ls", hdfs_path], retry_times=10)
        if code:
            _logger.error("HDFS list path: %s failed", hdfs_path)
            return []
        return [f[7] for _, f in self._listing(out)]

    def lsr(self, hdfs_path, excludes=()):
        """The files (not directories) under `hdfs_path`, recursively, less `excludes`."""
        if hdfs_path is None:
            raise ValueError("HDFSClient.lsr: hdfs_path is None")
        if not self.is_exist(hdfs_path):
            return []
        code, out, _ = self._run(["-lsr", hdfs_path], retry_times=1)
        if code:
            _logger.error("HDFS list all files: %s failed", hdfs_path)
            return []
        return [f[7] for _, f in self._listing(out)
                if not f[0].startswith("d") and f[7] not in excludes]

    @staticmethod
    def split_files(files, trainer_id, trainers):
        """Trainer `trainer_id`'s consecutive share of `files` (the first ones one longer)."""
        size, extra = divmod(len(files), trainers)
        begin = trainer_id * size + min(trainer_id, extra)
        return files[begin:begin + size + (1 if trainer_id < extra else 0)]

    def _each(self, items, multi_processes, work):
        """work(item) for every item, `multi_processes` at a time; True when all succeed."""
        with ThreadPoolExecutor(max(1, int(multi_processes))) as pool:
            return all(pool.map(work, items))

    def download(self, hdfs_path, local_path, multi_processes=5, overwrite=False,
                 retry_times=5):
        """Copy the files under `hdfs_path` into `local_path`; returns the local files."""
        self.make_local_dirs(local_path)

        def get(path):
            code, _, _ = self._run(["-get", path, local_path], retry_times=retry_times)
            if code:
                _logger.error("Get local path: %s from HDFS path: %s failed", local_path, path)
            return code == 0
        self._each(self.ls(hdfs_path), multi_processes, get)
        return [os.path.join(d, f) for d, _, files in os.walk(local_path) for f in files]

    def upload(self, hdfs_path, local_path, multi_processes=5, overwrite=False,
               retry_times=5):
        """Copy `local_path` (a file, or the entries of a directory) into `hdfs_path`."""
        if not os.path.exists(local_path):
            return
        files = [os.path.join(local_path, f) for f in sorted(os.listdir(local_path))] \
            if os.path.isdir(local_path) else [local_path]
        if not files:
            return
        if overwrite and self.is_exist(hdfs_path):
            self.delete(hdfs_path)
            self.makedirs(hdfs_path)

        def put(path):
            code, _, _ = self._run(["-put", path, hdfs_path], retry_times=retry_times)
            if code:
                _logger.error("Put local path: %s to HDFS path: %s failed", path, hdfs_path)
            return code == 0
        self._each(files, multi_processes, put)

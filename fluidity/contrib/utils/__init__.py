"""`fluid.contrib.utils`: the HDFS client of Fluid 1.x (hdfs_utils.HDFSClient)."""
from . import hdfs_utils
from .hdfs_utils import *  # noqa: F401,F403

__all__ = list(hdfs_utils.__all__)

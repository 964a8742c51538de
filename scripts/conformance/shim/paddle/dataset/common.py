import hashlib
import os

DATA_HOME = os.path.expanduser(os.environ.get("PADDLE_DATA_HOME", "~/.cache/paddle/dataset"))


def download(url, module_name, md5sum, save_name=None):
    raise RuntimeError(f"paddle.dataset.common.download({url!r}): the conformance run has no "
                       "network; the synthetic data sets stand in for downloads")


def md5file(fname):
    h = hashlib.md5()
    with open(fname, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def split(*args, **kwargs):
    raise RuntimeError("paddle.dataset.common.split is not part of the conformance shim")

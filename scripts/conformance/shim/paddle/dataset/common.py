"""paddle.dataset.common for the conformance run: `download` never reaches the network.

For the URLs Paddle 1.8's distributed tests fetch (`_synth_files.GENERATORS`) it writes a
synthetic file of the real one's format under DATA_HOME/<module_name>/ and returns its path, as
Paddle's `download` returns the cached file's; any other URL raises. The md5 the caller passes
is the real file's, so it is not checked against the synthetic one; a file already at the path
is kept only if it holds the synthetic bytes (a truncated or foreign file is rewritten).

DATA_HOME is $PADDLE_DATA_HOME, else `.paddle_dataset` under the directory the process started
in. Not ~/.cache/paddle/dataset: synthetic files there would be taken for real ones by Paddle
itself (ctr_dataset_reader trusts an extracted directory without an md5), and a run's data
belongs to the run. Not an environment variable alone either: Paddle's test_dist_base starts
trainers and pservers with an environment of its own (PATH, PYTHONPATH, ...), but in the test's
working directory, the extracted test tree, so they all find the same files, and the runner
deletes them with the tree.
"""
import hashlib
import os
import tempfile

from . import _synth_files

DATA_HOME = os.path.abspath(os.path.expanduser(
    os.environ.get("PADDLE_DATA_HOME") or os.path.join(os.getcwd(), ".paddle_dataset")))


_GENERATED = {}


def _generated(url, make):
    """The synthetic file's bytes, made once a process (readers download on every pass)."""
    if url not in _GENERATED:
        _GENERATED[url] = make()
    return _GENERATED[url]


def download(url, module_name, md5sum, save_name=None):
    make = _synth_files.GENERATORS.get(url)
    if make is None:
        raise RuntimeError(f"paddle.dataset.common.download({url!r}): the conformance run has "
                           "no network; the synthetic data sets stand in for downloads")
    dirname = os.path.join(DATA_HOME, module_name)
    os.makedirs(dirname, exist_ok=True)
    filename = os.path.join(dirname, url.split("/")[-1] if save_name is None else save_name)
    data = _generated(url, make)
    if not (os.path.isfile(filename) and md5file(filename) == hashlib.md5(data).hexdigest()):
        # trainers and pservers download at once: each writes its own temporary file and
        # renames it over the target, so no reader ever sees a partial file
        fd, tmp = tempfile.mkstemp(dir=dirname, prefix=".download-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)  # as a downloaded file's, not mkstemp's 0600
            os.replace(tmp, filename)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
    return filename


def md5file(fname):
    h = hashlib.md5()
    with open(fname, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def split(*args, **kwargs):
    raise RuntimeError("paddle.dataset.common.split is not part of the conformance shim")

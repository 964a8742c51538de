"""Arrays in anonymous shared memory: what forked Hogwild workers and their parent all see.

A worker process forked after an array is made here reads and writes the same pages as the
parent and the other workers, without locks and without copies; the parent still reads
them after a worker died (killed included), since the mapping is its own too.
"""
import mmap

import numpy as np

HUGE_PAGE_MIN = 4 << 20  # shared arrays at least this large ask for transparent huge pages
CACHE_LINE = 64


def shared_empty(shape, dtype):
    """An ndarray in an anonymous MAP_SHARED mapping: forked children write the same pages."""
    nbytes = max(int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize, 1)
    buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    if nbytes >= HUGE_PAGE_MIN and hasattr(mmap, "MADV_HUGEPAGE"):
        # random rows of a large sparse table cost a TLB miss each on 4 KiB pages; where the
        # kernel allows huge pages for shared memory (transparent_hugepage/shmem_enabled
        # "advise" or "within_size") this asks for them, as numpy does for private arrays
        try:
            buf.madvise(mmap.MADV_HUGEPAGE)
        except OSError:
            pass
    arr = np.frombuffer(buf, dtype=dtype, count=int(np.prod(shape, dtype=np.int64)))
    return arr.reshape(shape)


def is_shared(arr):
    """Whether `arr` lives in a shared mapping made by `shared_empty`."""
    b = arr
    while isinstance(b, np.ndarray):
        b = b.base
    return isinstance(b, memoryview) and isinstance(b.obj, mmap.mmap)


def aligned_empty(shape, dtype):
    """A zeroed private ndarray whose bytes start on a cache line and whose last line holds
    nothing else: what one worker thread writes per batch never shares a cache line with
    another worker's data (false sharing would serialize their stores)."""
    dtype = np.dtype(dtype)
    nbytes = max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1)
    padded = -(-nbytes // CACHE_LINE) * CACHE_LINE
    raw = np.zeros(padded + CACHE_LINE, np.uint8)
    off = (-raw.ctypes.data) % CACHE_LINE
    return raw[off:off + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize].view(
        dtype).reshape(shape)

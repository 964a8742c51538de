"""XXH32 (Yann Collet's xxHash, 32-bit), written from its published specification and
vectorised over the rows of a byte matrix, as xxhash64.py is for XXH64: pyramid_hash places
its embedding chunks by it, so its positions are the ones Paddle's (which links the xxHash
library) computes.

    xxh32_rows(np.frombuffer(b"abc", np.uint8)[None, :], seed=0)   # -> uint32 [1]
"""
import numpy as np

_P1, _P2, _P3, _P4, _P5 = (np.uint32(p) for p in (2654435761, 2246822519, 3266489917,
                                                  668265263, 374761393))
_U = np.uint32


def _rotl(x, r):
    return (x << _U(r)) | (x >> _U(32 - r))


def _words(block):
    """Little-endian uint32 words of a [N, 4k] uint8 block: [N, k]."""
    return np.ascontiguousarray(block).view("<u4").astype(np.uint32)


def xxh32_rows(data, seed=0):
    """XXH32 of every row of `data` (a [N, L] uint8 array) with `seed`: uint32 [N]."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    n, length = data.shape
    seed = _U(seed & 0xFFFFFFFF)
    with np.errstate(over="ignore"):
        pos = 0
        if length >= 16:
            v = [np.full(n, seed + _P1 + _P2, np.uint32), np.full(n, seed + _P2, np.uint32),
                 np.full(n, seed, np.uint32), np.full(n, seed - _P1, np.uint32)]
            stripes = length // 16
            words = _words(data[:, :stripes * 16]).reshape(n, stripes, 4)
            for s in range(stripes):
                for k in range(4):
                    v[k] = _rotl(v[k] + words[:, s, k] * _P2, 13) * _P1
            pos = stripes * 16
            h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
        else:
            h = np.full(n, seed + _P5, np.uint32)
        h = h + _U(length & 0xFFFFFFFF)
        while pos + 4 <= length:
            h = _rotl(h + _words(data[:, pos:pos + 4])[:, 0] * _P3, 17) * _P4
            pos += 4
        while pos < length:
            h = _rotl(h + data[:, pos].astype(np.uint32) * _P5, 11) * _P1
            pos += 1
        h = h ^ (h >> _U(15))
        h = h * _P2
        h = h ^ (h >> _U(13))
        h = h * _P3
        h = h ^ (h >> _U(16))
    return h

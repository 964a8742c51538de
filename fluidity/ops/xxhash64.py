"""XXH64 (Yann Collet's xxHash, 64-bit), written from its published specification, vectorised
over the rows of a byte matrix: the `hash` op hashes each row of its input this way, so its
numbers are the ones Paddle's (which links the xxHash library) produces.

    xxh64_rows(np.frombuffer(b"abc", np.uint8)[None, :], seed=0)   # -> uint64 [1]
"""
import numpy as np

_P1 = np.uint64(11400714785074694791)
_P2 = np.uint64(14029467366897019727)
_P3 = np.uint64(1609587929392839161)
_P4 = np.uint64(9650029242287828579)
_P5 = np.uint64(2870177450012600261)
_U = np.uint64


def _rotl(x, r):
    return (x << _U(r)) | (x >> _U(64 - r))


def _round(acc, lane):
    acc = acc + lane * _P2
    return _rotl(acc, 31) * _P1


def _merge(acc, val):
    acc = acc ^ _round(_U(0), val)
    return acc * _P1 + _P4


def _lanes(block, width):
    """Little-endian unsigned words of `width` bytes from a [N, k*width] uint8 block."""
    dt = {8: "<u8", 4: "<u4"}[width]
    return np.ascontiguousarray(block).view(dt).astype(np.uint64)


def xxh64_rows(data, seed=0):
    """XXH64 of every row of `data` (a [N, L] uint8 array) with `seed`: uint64 [N]."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    n, length = data.shape
    seed = _U(seed & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        pos = 0
        if length >= 32:
            v = [np.full(n, seed + _P1 + _P2, np.uint64), np.full(n, seed + _P2, np.uint64),
                 np.full(n, seed, np.uint64), np.full(n, seed - _P1, np.uint64)]
            stripes = length // 32
            words = _lanes(data[:, :stripes * 32], 8).reshape(n, stripes, 4)
            for s in range(stripes):
                for k in range(4):
                    v[k] = _round(v[k], words[:, s, k])
            pos = stripes * 32
            h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
            for k in range(4):
                h = _merge(h, v[k])
        else:
            h = np.full(n, seed + _P5, np.uint64)
        h = h + _U(length)
        while pos + 8 <= length:
            k1 = _round(_U(0), _lanes(data[:, pos:pos + 8], 8)[:, 0])
            h = _rotl(h ^ k1, 27) * _P1 + _P4
            pos += 8
        if pos + 4 <= length:
            h = h ^ (_lanes(data[:, pos:pos + 4], 4)[:, 0] * _P1)
            h = _rotl(h, 23) * _P2 + _P3
            pos += 4
        while pos < length:
            h = h ^ (data[:, pos].astype(np.uint64) * _P5)
            h = _rotl(h, 11) * _P1
            pos += 1
        h = h ^ (h >> _U(33))
        h = h * _P2
        h = h ^ (h >> _U(29))
        h = h * _P3
        h = h ^ (h >> _U(32))
    return h

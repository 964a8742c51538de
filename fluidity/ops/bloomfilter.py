"""The bloom filter pyramid_hash's white and black lists are, read as Paddle 1.8 stores and
probes it (operators/math/bloomfilter.h): the float tensor's bytes are a packed struct
{u64 magic 17070416, u64 m bits, u64 k, u64 count, bits (MSB first)}; a key is in the filter
when, for i in 0..k-1, both halves of MurmurHash3_x64_128(key, seed=i) mod m hit set bits
(Paddle's MurmurHash3 reads its tail as two masked 8-byte words: the same numbers as the
reference algorithm's)."""
import struct

import numpy as np

from ..errors import ExecutionError

MAGIC = 17070416
_M64 = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
_HEADER = 32


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix(k):
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def murmur3_x64_128(key, seed):
    """(h1, h2) of `key` (bytes) as Paddle's murmurhash3_x64_128 computes them."""
    n = len(key)
    h1 = h2 = seed & 0xFFFFFFFF
    nblocks = n // 16
    for i in range(nblocks):
        k1, k2 = struct.unpack_from("<QQ", key, i * 16)
        k1 = (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
        h1 = ((_rotl(h1 ^ k1, 27) + h2) * 5 + 0x52DCE729) & _M64
        k2 = (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
        h2 = ((_rotl(h2 ^ k2, 31) + h1) * 5 + 0x38495AB5) & _M64
    tail = (key[nblocks * 16:] + bytes(16))[:16]
    t0, t1 = struct.unpack("<QQ", tail)
    flag = n & 15
    if flag and flag <= 8:
        t0 &= _M64 >> ((8 - flag) << 3)
    elif flag > 8:
        t1 &= 0x00FFFFFFFFFFFFFF >> ((15 - flag) << 3)
        h2 ^= (_rotl((t1 * _C2) & _M64, 33) * _C1) & _M64
    if flag:
        h1 ^= (_rotl((t0 * _C1) & _M64, 31) * _C2) & _M64
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return h1, h2


class BloomFilter:
    """A filter read from a tensor's bytes; ExecutionError naming `what` when they do not
    hold one (Paddle's "filter not load")."""

    def __init__(self, array, what):
        raw = np.ascontiguousarray(array).tobytes()
        if len(raw) < _HEADER or struct.unpack_from("<Q", raw)[0] != MAGIC:
            raise ExecutionError(f"pyramid_hash: {what} does not hold a bloom filter (magic "
                                 f"number {MAGIC} expected): {what.lower()} filter not load")
        self.m, self.k = struct.unpack_from("<QQ", raw, 8)
        self.bits = np.frombuffer(raw, np.uint8, offset=_HEADER)
        if self.m == 0 or self.m > self.bits.size * 8:
            raise ExecutionError(f"pyramid_hash: {what}'s bloom filter claims {self.m} bits "
                                 f"but holds {self.bits.size * 8}")

    def _bit(self, n):
        return (self.bits[n >> 3] >> (7 - (n & 7))) & 1

    def __contains__(self, key):
        for i in range(self.k):
            h1, h2 = murmur3_x64_128(key, i)
            if not self._bit(h1 % self.m) or not self._bit(h2 % self.m):
                return False
        return True


def build(keys, m, k):
    """The float32 array of a filter of `m` bits and `k` probes holding `keys` (bytes), in
    Paddle's layout (what a white or black list parameter is loaded with)."""
    bits = np.zeros((m + 7) // 8, np.uint8)
    for key in keys:
        for i in range(k):
            for h in murmur3_x64_128(key, i):
                n = h % m
                bits[n >> 3] |= 1 << (7 - (n & 7))
    raw = struct.pack("<QQQQ", MAGIC, m, k, len(keys)) + bits.tobytes()
    raw += bytes(-len(raw) % 4)
    return np.frombuffer(raw, np.float32).reshape(-1, 1).copy()

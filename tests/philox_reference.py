"""An independent scalar Philox4x32-10 on Python ints, straight from Salmon et al. (SC'11),
and the word layout core/philox.py documents: the tests' reference for the random ops'
numbers (never values copied from a run)."""
import math


def scalar_philox(ctr, key):
    """Philox4x32-10 on Python ints, straight from Salmon et al. (SC'11)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    mask = 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & mask, p1 & mask, \
            ((p0 >> 32) ^ c3 ^ k1) & mask, p0 & mask
        k0, k1 = (k0 + 0x9E3779B9) & mask, (k1 + 0xBB67AE85) & mask
    return [c0, c1, c2, c3]


def scalar_word(j, seed, stream, run):
    b = j // 4
    ctr = (b & 0xFFFFFFFF, b >> 32, run & 0xFFFFFFFF, run >> 32)
    return scalar_philox(ctr, (seed & 0xFFFFFFFF, stream & 0xFFFFFFFF))[j % 4]


def keep_mask(n, p, seed, stream=0, run=0):
    """Dropout's mask over n elements: 1 where (word >> 8) >= ceil(p * 2**24)."""
    t = math.ceil(p * 2 ** 24)
    return [int((scalar_word(j, seed, stream, run) >> 8) >= t) for j in range(n)]


def uniform(n, lo, hi, seed, stream=0, run=0):
    """float32-grained U[lo, hi) values as doubles (before the rounding to float32)."""
    return [lo + (scalar_word(j, seed, stream, run) >> 8) * 2.0 ** -24 * (hi - lo)
            for j in range(n)]

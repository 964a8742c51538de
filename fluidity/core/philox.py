"""The one random stream of Fluidity's random ops: Philox4x32-10 (Salmon et al., "Parallel
random numbers: as easy as 1, 2, 3", SC'11), a counter-based generator, in numpy. The code
generator's runtime has the same functions in C (codegen/runtime/philox.h), so interpreted
and compiled programs draw bit-identical numbers.

Why counter-based: element i's number is a pure function of (key, counter), with no state
walked from element 0, so a whole tensor is one vectorized pass here and one loop (or one
thread per element) in generated code, and the two agree by construction. Philox4x32-10 is
the usual choice (cuRAND, PyTorch, JAX, TensorFlow use it): it passes BigCrush, needs only
32-bit multiplies, and gives four words per call.

The mapping, documented once:

    key     = (k0, k1)
    counter = (c0, c1, c2, c3) = (block mod 2**32, block >> 32, run mod 2**32, run >> 32)
    word j of a draw = word j % 4 of philox4x32_10(counter with block = j // 4, key)

A seeded op (its `seed` attribute, or its Seed input) draws with key (seed mod 2**32, 0) and
run 0: the same numbers every run, and the same as any other op with that seed, as Fluid's
kernels seed an engine with it (a program with `random_seed` set rebuilt under other names
draws the same numbers). An op with seed 0 draws with key (its state's key, its stream) and
its state's run, which advances each run: `stream` names the op (`stream_id`: CRC-32 of its
first output variable's name), the state is described below.

From words to numbers (every float step a plain IEEE double operation, so the C twin
rounds exactly as numpy does; the transcendental functions are our own polynomials for the
same reason: libm and numpy's SIMD loops may differ in the last bit):

    uniform float32 element i:  u = (word_i >> 8) * 2**-24                  in [0, 1)
    uniform float64 element i:  u = ((word_2i >> 5) * 2**26 + (word_2i+1 >> 6)) * 2**-53
    U[lo, hi):                  lo + u * (hi - lo) in double, rounded to the dtype
    normal element i:           Box-Muller, one normal per two words:
                                u1 = (word_2i + 1) * 2**-32 in (0, 1], u2 = word_2i+1 * 2**-32,
                                z = sqrt(-2 log u1) * cos(2 pi u2);  mean + std * z in double
    Bernoulli keep(p) element i: (word_i >> 8) >= ceil(p * 2**24)  (dropout's mask)
    integer in [0, n):          (word_i * n) >> 32                  (Lemire's multiply-shift)

An op with seed 0 keeps its state as data in the scope: an int64 [2] tensor
[key, run] under `state_name(stream variable)`, made by `new_state` (a fresh key from the OS,
run 0) the first time a plan binds it, advanced by the op at each run. Copy it to repeat a
sequence of runs elsewhere (another scope, the compiled program).
"""
import os
import zlib

import numpy as np

from .tensor import LoDTensor

M0, M1 = 0xD2511F53, 0xCD9E8D57          # Philox4x32 multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85          # Weyl key increments
ROUNDS = 10
STATE_PREFIX = "@RNG_STATE@"

_M0, _M1 = np.uint64(M0), np.uint64(M1)
_LO = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counters (uint32 arrays, broadcast together) under key (k0, k1):
    four uint32 arrays."""
    c0, c1, c2, c3 = (np.asarray(c, np.uint32).astype(np.uint64) for c in (c0, c1, c2, c3))
    k0, k1 = int(k0) & 0xFFFFFFFF, int(k1) & 0xFFFFFFFF
    for r in range(ROUNDS):
        p0, p1 = _M0 * c0, _M1 * c2             # exact: 32 x 32 bits fit 64
        h0, l0, h1, l1 = p0 >> _S32, p0 & _LO, p1 >> _S32, p1 & _LO
        c0, c1, c2, c3 = h1 ^ c1 ^ np.uint64(k0), l1, h0 ^ c3 ^ np.uint64(k1), l0
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def words(n, seed, stream, run=0, first=0):
    """Words [first, first + n) of the draw of (seed, stream, run): uint32 [n]."""
    n = int(n)
    if n <= 0:
        return np.zeros(0, np.uint32)
    b0, b1 = first // 4, (first + n - 1) // 4 + 1
    blocks = np.arange(b0, b1, dtype=np.uint64)
    run = int(run) & 0xFFFFFFFFFFFFFFFF
    out = philox4x32(blocks & _LO, blocks >> _S32, run & 0xFFFFFFFF, run >> 32,
                     seed, stream)
    w = np.stack(out, axis=1).reshape(-1)
    s = first - 4 * b0
    return w[s:s + n]


# --- identities and state ------------------------------------------------------------------
def stream_id(name):
    """The stream of an op named by its first output variable: a 32-bit CRC-32 of the name's
    UTF-8 bytes (stable across processes, interpreter and compiled code)."""
    return zlib.crc32(str(name).encode("utf-8", "surrogatepass")) & 0xFFFFFFFF


def state_name(stream_var):
    """The scope variable holding the [key, run] state of the op whose stream is named by
    variable `stream_var`."""
    return STATE_PREFIX + str(stream_var)


def new_state():
    """A fresh [key, run] state: a random 32-bit key from the OS (Fluid's seed 0 takes
    std::random_device's), run 0."""
    return np.array([int.from_bytes(os.urandom(4), "little"), 0], np.int64)


def bound_state(scope, name):
    """The scope Variable `name` holding a random op's state, as a run binds it: found up the
    scope chain, else made in the root scope (it outlives a run's local scope, like a
    persistable), holding a `new_state()` when it holds no tensor yet."""
    v = scope.find_var(name)
    if v is None:
        v = scope.root().var(name)
    if v.value is None or getattr(v.value, "_array", None) is None:
        v.value = LoDTensor(new_state())
    return v


def key_and_run(seed, state, stream):
    """(k0, k1, run) of one run of an op: a seeded op's (seed, 0, 0), the same numbers every
    run and for every op with that seed (Fluid's kernels seed an engine with it); an op with
    seed 0 its state's key, its own stream and its state's run, the state then advanced (in
    place) for the next run."""
    if seed:
        return int(seed) & 0xFFFFFFFF, 0, 0
    if state is None:
        raise ValueError("a random op with seed 0 needs its [key, run] state")
    if not isinstance(state, np.ndarray) or state.dtype != np.int64 or state.shape != (2,):
        raise ValueError(f"a random op's state must be an int64 [key, run] pair, got "
                         f"{getattr(state, 'dtype', type(state).__name__)} "
                         f"{list(np.shape(state))}")
    key, run = int(state[0]) & 0xFFFFFFFF, int(state[1])
    state[1] = run + 1
    return key, int(stream) & 0xFFFFFFFF, run


# --- own transcendental functions: plain IEEE double operations only ----------------------
LN2 = 0.6931471805599453
TWO_PI = 6.283185307179586
INV_LN2 = 1.4426950408889634
SQRT_HALF = 0.7071067811865476
LN2_HI = float.fromhex("0x1.62e42feep-1")     # fdlibm's split of log(2): k * LN2_HI is
LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")   # exact for |k| < 2**11
# log(m) = 2 s (1 + s^2/3 + s^4/5 + ...), s = (m - 1) / (m + 1), m in [sqrt(1/2), sqrt(2))
LOG_C = tuple(1.0 / (2 * k + 1) for k in range(11))
# cos(x) = sum (-1)^k x^2k / (2k)!, x in [0, pi/2]
COS_C = tuple((-1.0) ** k / float(np.prod(np.arange(1, 2 * k + 1, dtype=np.float64)))
              for k in range(12))
# exp(r) = sum r^k / k!, |r| <= log(2) / 2
EXP_C = tuple(1.0 / float(np.prod(np.arange(1, k + 1, dtype=np.float64))) for k in range(16))


def _horner(coef, x):
    acc = np.full(np.shape(x), coef[-1])
    for c in coef[-2::-1]:
        acc = acc * x + c
    return acc


def log(x):
    """Natural log of positive finite doubles (relative error ~1e-16)."""
    m, e = np.frexp(np.asarray(x, np.float64))
    small = m < SQRT_HALF
    m = np.where(small, m * 2.0, m)
    e = np.where(small, e - 1, e).astype(np.float64)
    s = (m - 1.0) / (m + 1.0)
    return e * LN2 + (2.0 * s) * _horner(LOG_C, s * s)


def cos_2pi(u):
    """cos(2 pi u) for u in [0, 1), reduced exactly to [0, pi/2] by symmetry."""
    u = np.asarray(u, np.float64)
    t = np.where(u > 0.5, 1.0 - u, u)             # cos(2 pi u) = cos(2 pi (1 - u))
    flip = t > 0.25                                # cos(x) = -cos(pi - x)
    t = np.where(flip, 0.5 - t, t)
    x = t * TWO_PI
    c = _horner(COS_C, x * x)
    return np.where(flip, -c, c)


def exp(y):
    """exp of doubles in about [-700, 700]: 2**k * exp(r), k = floor(y / log 2 + 1/2)."""
    y = np.asarray(y, np.float64)
    k = np.floor(y * INV_LN2 + 0.5)
    r = (y - k * LN2_HI) - k * LN2_LO
    return np.ldexp(_horner(EXP_C, r), k.astype(np.int64))


# --- from words to numbers -------------------------------------------------------------------
def uniform01(n, seed, stream, run=0, dtype=np.float32):
    """n uniforms in [0, 1) (doubles holding float32- or float64-grained values)."""
    if np.dtype(dtype) == np.float64:
        w = words(2 * n, seed, stream, run).reshape(-1, 2)
        hi, lo = (w[:, 0] >> np.uint32(5)).astype(np.float64), \
            (w[:, 1] >> np.uint32(6)).astype(np.float64)
        return (hi * 67108864.0 + lo) * 2.0 ** -53
    return (words(n, seed, stream, run) >> np.uint32(8)).astype(np.float64) * 2.0 ** -24


def uniform(shape, lo, hi, seed, stream, run=0, dtype=np.float32):
    """U[lo, hi) of `shape`: lo + u * (hi - lo) in double, rounded to `dtype`."""
    n = int(np.prod(shape, dtype=np.int64))
    u = uniform01(n, seed, stream, run, dtype)
    lo, hi = float(lo), float(hi)
    return (lo + u * (hi - lo)).astype(dtype).reshape(shape)


def standard_normal(n, seed, stream, run=0, first=0):
    """Standard normals [first, first + n) of the draw (doubles), Box-Muller over word
    pairs."""
    w = words(2 * n, seed, stream, run, 2 * first).reshape(-1, 2).astype(np.float64)
    u1 = (w[:, 0] + 1.0) * 2.0 ** -32
    u2 = w[:, 1] * 2.0 ** -32
    return np.sqrt(-2.0 * log(u1)) * cos_2pi(u2)


def normal(shape, mean, std, seed, stream, run=0, dtype=np.float32):
    """N(mean, std^2) of `shape`: mean + std * z in double, rounded to `dtype`."""
    n = int(np.prod(shape, dtype=np.int64))
    z = standard_normal(n, seed, stream, run)
    return (float(mean) + float(std) * z).astype(dtype).reshape(shape)


def keep_threshold(p):
    """The 24-bit threshold of keep(p): ceil(p * 2**24) (2**24 for p >= 1: none kept)."""
    p = min(max(float(p), 0.0), 1.0)
    return int(np.ceil(p * 16777216.0))


def keep_mask(shape, p, seed, stream, run=0):
    """Dropout's mask: 1 where (word >> 8) >= ceil(p * 2**24), as uint8 of `shape`."""
    n = int(np.prod(shape, dtype=np.int64))
    w = words(n, seed, stream, run) >> np.uint32(8)
    return (w >= np.uint32(keep_threshold(p))).astype(np.uint8).reshape(shape)


def integers(n, bound, seed, stream, run=0, first=0):
    """n integers in [0, bound) (bound < 2**32): (word * bound) >> 32, as int64."""
    w = words(n, seed, stream, run, first).astype(np.uint64)
    return ((w * np.uint64(bound)) >> _S32).astype(np.int64)

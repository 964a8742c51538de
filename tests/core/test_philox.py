"""core/philox.py: Philox4x32-10 against its published known answers and an independent
scalar implementation (tests/philox_reference.py), the documented word-to-number mapping,
the numbers' statistics (bounds from n, 6 sigma), its own log/cos/exp, and the state rule
(seeded ops repeat, seed 0 advances)."""
import math

import numpy as np
import pytest
from philox_reference import scalar_philox, scalar_word

from fluidity.core import philox


# Random123's kat_vectors for philox4x32_10
KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
       ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
       ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_known_answers(ctr, key, want):
    assert [int(w) for w in philox.philox4x32(*ctr, *key)] == list(want)
    assert scalar_philox(ctr, key) == list(want)


@pytest.mark.parametrize("seed,stream,run,first,n", [
    (1, 0, 0, 0, 9), (7, 0xDEADBEEF, 3, 5, 11), (2 ** 32 - 1, 12345, 2 ** 33 + 7, 2 ** 34 + 2, 6)])
def test_words_follow_the_documented_counter_layout(seed, stream, run, first, n):
    got = philox.words(n, seed, stream, run, first)
    assert got.dtype == np.uint32
    assert [int(w) for w in got] == [scalar_word(j, seed, stream, run)
                                     for j in range(first, first + n)]


def test_numbers_from_words_follow_the_mapping():
    seed, stream, run = 11, 22, 3
    w = [scalar_word(j, seed, stream, run) for j in range(8)]
    u = philox.uniform((4,), -2.0, 3.0, seed, stream, run)
    assert u.dtype == np.float32
    np.testing.assert_array_equal(u, np.float32([-2.0 + (x >> 8) * 2.0 ** -24 * 5.0
                                                 for x in w[:4]]))
    u64 = philox.uniform((2,), 0.0, 1.0, seed, stream, run, np.float64)
    assert list(u64) == [((w[2 * i] >> 5) * 2 ** 26 + (w[2 * i + 1] >> 6)) * 2.0 ** -53
                         for i in range(2)]
    z = philox.standard_normal(4, seed, stream, run)
    want = [math.sqrt(-2 * math.log((w[2 * i] + 1) * 2.0 ** -32)) *
            math.cos(2 * math.pi * w[2 * i + 1] * 2.0 ** -32) for i in range(4)]
    np.testing.assert_allclose(z, want, rtol=1e-13, atol=1e-13)
    mask = philox.keep_mask((8,), 0.3, seed, stream, run)
    assert list(mask) == [int((x >> 8) >= math.ceil(0.3 * 2 ** 24)) for x in w]
    ints = philox.integers(8, 10, seed, stream, run)
    assert list(ints) == [(x * 10) >> 32 for x in w]


def test_own_transcendentals_are_accurate():
    x = np.concatenate([np.geomspace(1e-300, 1e300, 2001), [0.5, 1.0, 2.0, 2.0 ** -32]])
    np.testing.assert_allclose(philox.log(x), np.log(x), rtol=4e-16, atol=4e-16)
    u = np.arange(4096) / 4096.0
    np.testing.assert_allclose(philox.cos_2pi(u), np.cos(2 * np.pi * u), atol=2e-15)
    y = np.linspace(-700, 700, 4001)
    np.testing.assert_allclose(philox.exp(y), np.exp(y), rtol=1e-14)


N = 200_000
SIGMAS = 6.0


def test_uniform_statistics():
    u = philox.uniform((N,), -1.0, 3.0, 5, 9, 0).astype(np.float64)
    assert u.min() >= -1.0 and u.max() < 3.0
    # U[-1, 3): mean 1, variance 16 / 12; the variance of the sample variance is
    # (mu4 - sigma^4) / n with mu4 = (b - a)^4 / 80
    var = 16 / 12
    assert abs(u.mean() - 1.0) < SIGMAS * math.sqrt(var / N)
    assert abs(u.var() - var) < SIGMAS * math.sqrt((256 / 80 - var ** 2) / N)


def test_normal_statistics():
    z = philox.normal((N,), 2.0, 3.0, 5, 9, 1).astype(np.float64)
    assert abs(z.mean() - 2.0) < SIGMAS * 3.0 / math.sqrt(N)
    assert abs(z.var() - 9.0) < SIGMAS * 9.0 * math.sqrt(2.0 / N)
    # tails: P(|z| > 2 sigma) = 0.0455, a binomial proportion
    p = 0.0455003
    tail = np.mean(np.abs(z - 2.0) > 6.0)
    assert abs(tail - p) < SIGMAS * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_keep_mask_rate(p):
    m = philox.keep_mask((N,), p, 3, 4, 0)
    assert m.dtype == np.uint8
    if p in (0.0, 1.0):
        assert m.sum() == (N if p == 0.0 else 0)
    else:
        assert abs(m.mean() - (1 - p)) < SIGMAS * math.sqrt(p * (1 - p) / N)


def test_integers_cover_the_range_evenly():
    k = 10
    v = philox.integers(N, k, 1, 2, 0)
    assert v.min() == 0 and v.max() == k - 1
    counts = np.bincount(v, minlength=k)
    assert np.all(np.abs(counts - N / k) < SIGMAS * math.sqrt(N * (1 / k) * (1 - 1 / k)))


def test_streams_and_runs_draw_different_words():
    a = philox.words(64, 1, 2, 0)
    assert not np.array_equal(a, philox.words(64, 1, 3, 0))
    assert not np.array_equal(a, philox.words(64, 1, 2, 1))
    assert not np.array_equal(a, philox.words(64, 2, 2, 0))


def test_seeded_ops_repeat_and_seed_zero_advances_its_state():
    state = np.array([77, 5], np.int64)
    assert philox.key_and_run(9, state, 123) == (9, 0, 0)
    assert list(state) == [77, 5]
    assert philox.key_and_run(0, state, 123) == (77, 123, 5)
    assert philox.key_and_run(0, state, 123) == (77, 123, 6)
    assert list(state) == [77, 7]
    with pytest.raises(ValueError, match="state"):
        philox.key_and_run(0, None, 1)


def test_new_states_have_fresh_keys_and_start_at_run_zero():
    states = [philox.new_state() for _ in range(8)]
    assert all(s.dtype == np.int64 and s.shape == (2,) and s[1] == 0 for s in states)
    assert len({int(s[0]) for s in states}) > 1


def test_stream_ids_name_ops_stably():
    assert philox.stream_id("dropout_0.tmp_0") == philox.stream_id("dropout_0.tmp_0")
    assert philox.stream_id("dropout_0.tmp_0") != philox.stream_id("dropout_1.tmp_0")
    assert philox.state_name("x") == philox.STATE_PREFIX + "x"

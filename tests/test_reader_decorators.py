"""fluidity.reader: paddle.reader's decorators and fluidity.batch."""
import pytest

import fluidity as fluid
from fluidity import reader as R


def counter(n, start=0):
    def r():
        return iter(range(start, start + n))
    return r


def test_batch_and_drop_last():
    assert list(fluid.batch(counter(5), 2)()) == [[0, 1], [2, 3], [4]]
    assert list(fluid.batch(counter(5), 2, drop_last=True)()) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="batch_size"):
        fluid.batch(counter(5), 0)
    with pytest.raises(TypeError, match="reader"):
        fluid.batch([1, 2], 2)


def test_shuffle_keeps_the_samples():
    out = list(R.shuffle(counter(50), buf_size=7)())
    assert sorted(out) == list(range(50))


def test_map_chain_firstn_compose():
    assert list(R.map_readers(lambda a, b: a + b, counter(3), counter(3, 10))()) == [10, 12, 14]
    assert list(R.chain(counter(2), counter(2, 5))()) == [0, 1, 5, 6]
    assert list(R.firstn(counter(10), 3)()) == [0, 1, 2]
    pairs = R.map_readers(lambda a: (a, a * 2), counter(3))
    assert list(R.compose(pairs, counter(3, 7))()) == [(0, 0, 7), (1, 2, 8), (2, 4, 9)]
    with pytest.raises(R.ComposeNotAligned):
        list(R.compose(counter(2), counter(3))())
    assert list(R.compose(counter(2), counter(3), check_alignment=False)()) == [(0, 0), (1, 1)]


def test_buffered_cache_xmap():
    assert list(R.buffered(counter(20), 3)()) == list(range(20))
    calls = []

    def once():
        calls.append(1)
        return iter([1, 2])
    c = R.cache(once)
    assert list(c()) == [1, 2] and list(c()) == [1, 2] and len(calls) == 1
    assert list(R.xmap_readers(lambda x: x * x, counter(30), 3, 4, order=True)()) == \
        [i * i for i in range(30)]
    assert sorted(R.xmap_readers(lambda x: x + 1, counter(30), 2, 4)()) == list(range(1, 31))


def test_buffered_passes_errors_on():
    def bad():
        yield 1
        raise RuntimeError("broken reader")
    with pytest.raises(RuntimeError, match="broken reader"):
        list(R.buffered(bad, 2)())


def test_multiprocess_reader():
    out = list(R.multiprocess_reader([counter(5), counter(5, 100)], queue_size=10)())
    assert sorted(out) == list(range(5)) + list(range(100, 105))


def test_multiprocess_reader_surfaces_a_failing_reader_as_enforce_not_met():
    """Fluid's loaders hand a reader process's failure to the reading loop as
    core.EnforceNotMet; it is also a RuntimeError, naming the reader's error."""
    import pytest

    import fluidity as fluid

    def failing():
        yield 1
        raise ValueError("bad sample")
    with pytest.raises(fluid.core.EnforceNotMet, match="bad sample") as e:
        list(R.multiprocess_reader([failing])())
    assert isinstance(e.value, RuntimeError)

"""fluid.average.WeightedAverage: the weighted running mean Fluid 1.x loops keep."""
import numpy as np
import pytest

import fluidity as fluid


def test_weighted_average():
    with pytest.warns(Warning, match="deprecated"):
        avg = fluid.average.WeightedAverage()
    with pytest.raises(ValueError, match="no data"):
        avg.eval()
    avg.add(np.array([0.5]), np.array([32]))
    avg.add(1.0, 16)
    assert avg.eval() == pytest.approx((0.5 * 32 + 16) / 48)
    with pytest.raises(ValueError, match="weight"):
        avg.add(1.0, np.ones(2))
    with pytest.raises(ValueError, match="value"):
        avg.add("1", 1)
    avg.reset()
    avg.add(np.array([1.0, 3.0]), 2)
    np.testing.assert_allclose(avg.eval(), [1.0, 3.0])

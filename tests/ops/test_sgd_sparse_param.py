"""sgd of a SelectedRows Param by a SelectedRows Grad (Paddle's sparse-parameter kernel):
each gradient row updates the Param row of the same id, duplicates accumulate, and a
gradient row the Param lacks is an error naming it."""
import numpy as np
import pytest

from fluidity import core, errors
from fluidity.op import Operator


def _scope(param_rows, grad_rows, width=3):
    scope = core.Scope()
    g = scope.var("Grad").get_selected_rows()
    g.set_height(10)
    g.set_rows(grad_rows)
    grad = np.arange(len(grad_rows) * width, dtype="f4").reshape(len(grad_rows), width)
    g.get_tensor().set(grad, core.CPUPlace())
    w = scope.var("Param").get_selected_rows()
    w.set_height(10)
    w.set_rows(param_rows)
    value = np.ones((len(param_rows), width), "f4") * \
        np.arange(len(param_rows), dtype="f4")[:, None]
    w.get_tensor().set(value, core.CPUPlace())
    scope.var("LearningRate").get_tensor().set(np.array([0.5], "f4"), core.CPUPlace())
    return scope, w, value, grad


def _run(scope):
    Operator("sgd", Param="Param", Grad="Grad", ParamOut="Param",
             LearningRate="LearningRate").run(scope, core.CPUPlace())


def test_rows_of_rows_against_numpy():
    param_rows, grad_rows = [2, 5, 7, 9], [7, 2, 7]
    scope, w, value, grad = _scope(param_rows, grad_rows)
    want = value.copy()
    for i, r in enumerate(grad_rows):
        want[param_rows.index(r)] -= np.float32(0.5) * grad[i]
    _run(scope)
    np.testing.assert_array_equal(np.array(w.get_tensor()), want)
    assert w.rows() == param_rows


def test_a_gradient_row_the_param_lacks_is_an_error():
    scope, w, value, _ = _scope([2, 5], [5, 3])
    with pytest.raises(errors.ExecutionError, match=r"Grad rows \[3\]"):
        _run(scope)


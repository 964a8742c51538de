"""``fluid.evaluator``: Fluid 1.x's in-program evaluators (deprecated there in favour of
``fluid.metrics``, but real 1.8 scripts such as PaddleCV's OCR models still use them).

An evaluator keeps its running totals in persistable state variables that the main program
updates every mini-batch (a ``sums`` op adds the batch's counts into the state), so the
totals live in the scope, not in Python. ``reset`` runs a tiny program that zeroes the states;
``eval`` runs a tiny program that reads them back and returns the pass-level figures as
``[1]`` float arrays, as Fluid 1.x does.
"""

import warnings

import numpy as np

from . import layers, unique_name
from .framework import Program, Variable, program_guard
from .layer_helper import LayerHelper

__all__ = ["ChunkEvaluator", "EditDistance"]


def _state_view(block, var):
    """Declare ``var`` (a persistable state of the main program) in another program's block, so
    that program reads and writes the same scope variable."""
    if not isinstance(var, Variable):
        raise TypeError("evaluator state must be a Variable, got %s" % type(var).__name__)
    return block.create_var(name=var.name, shape=var.shape, dtype=var.dtype,
                            type=var.type, lod_level=var.lod_level, persistable=True)


class Evaluator(object):
    """Base of the evaluators: ``states`` are zeroed by ``reset``; ``metrics`` are the per-batch
    values a user fetches alongside the loss."""

    def __init__(self, name, **kwargs):
        warnings.warn("fluid.evaluator.%s is deprecated; use fluid.metrics.%s instead"
                      % (type(self).__name__, type(self).__name__), Warning)
        self.states = []
        self.metrics = []
        self.helper = LayerHelper(name, **kwargs)

    def _check_root_block(self):
        if self.helper.main_program.current_block().idx != 0:
            raise ValueError("%s can only be created in the root block of a program, not in "
                             "a sub-block" % type(self).__name__)

    def reset(self, executor, reset_program=None):
        """Zero every state variable (at the start of a pass)."""
        if reset_program is None:
            reset_program = Program()
        with program_guard(main_program=reset_program):
            for var in self.states:
                view = _state_view(reset_program.current_block(), var)
                layers.fill_constant(shape=view.shape, value=0.0, dtype=view.dtype, out=view)
        executor.run(reset_program)

    def eval(self, executor, eval_program=None):
        raise NotImplementedError("%s does not define eval" % type(self).__name__)

    def _create_state(self, suffix, dtype, shape):
        state = self.helper.create_variable(
            name="_".join([unique_name.generate(self.helper.name), suffix]),
            persistable=True, dtype=dtype, shape=shape)
        self.states.append(state)
        return state


class ChunkEvaluator(Evaluator):
    """Accumulates ``chunk_eval``'s counts over mini-batches; ``eval`` gives the pass's
    precision, recall and F1. ``metrics`` are the batch's precision, recall and F1."""

    def __init__(self, input, label, chunk_scheme, num_chunk_types, excluded_chunk_types=None):
        super(ChunkEvaluator, self).__init__("chunk_eval")
        self._check_root_block()
        self.num_infer_chunks = self._create_state("num_infer_chunks", "int64", [1])
        self.num_label_chunks = self._create_state("num_label_chunks", "int64", [1])
        self.num_correct_chunks = self._create_state("num_correct_chunks", "int64", [1])
        (precision, recall, f1_score, num_infer, num_label,
         num_correct) = layers.chunk_eval(input=input, label=label, chunk_scheme=chunk_scheme,
                                          num_chunk_types=num_chunk_types,
                                          excluded_chunk_types=excluded_chunk_types)
        for state, batch in ((self.num_infer_chunks, num_infer),
                             (self.num_label_chunks, num_label),
                             (self.num_correct_chunks, num_correct)):
            layers.sums(input=[state, batch], out=state)
        self.metrics.extend([precision, recall, f1_score])

    def eval(self, executor, eval_program=None):
        if eval_program is None:
            eval_program = Program()
        block = eval_program.current_block()
        infer, label, correct = (
            int(np.asarray(v).reshape(-1)[0]) for v in executor.run(
                eval_program, fetch_list=[_state_view(block, s) for s in self.states]))
        precision = float(correct) / infer if infer else 0.0
        recall = float(correct) / label if label else 0.0
        f1 = 2.0 * precision * recall / (precision + recall) if correct else 0.0
        return (np.array([precision], dtype="float32"), np.array([recall], dtype="float32"),
                np.array([f1], dtype="float32"))


class EditDistance(Evaluator):
    """Accumulates ``edit_distance`` over mini-batches. ``metrics`` are the batch's summed
    distance and its count of wrong sequences; ``eval`` gives the pass's average distance and
    instance error rate (the share of sequences with a nonzero distance)."""

    def __init__(self, input, label, ignored_tokens=None, **kwargs):
        super(EditDistance, self).__init__("edit_distance", **kwargs)
        self._check_root_block()
        self.total_distance = self._create_state("total_distance", "float32", [1])
        self.seq_num = self._create_state("seq_num", "int64", [1])
        self.instance_error = self._create_state("instance_error", "int64", [1])
        distances, seq_num = layers.edit_distance(input=input, label=label,
                                                  ignored_tokens=ignored_tokens)
        zero = layers.fill_constant(shape=[1], value=0.0, dtype="float32")
        right = layers.reduce_sum(layers.cast(x=layers.equal(distances, zero), dtype="int64"))
        wrong = layers.elementwise_sub(x=seq_num, y=right)
        total_distance = layers.reduce_sum(distances)
        layers.sums(input=[self.total_distance, total_distance], out=self.total_distance)
        layers.sums(input=[self.seq_num, seq_num], out=self.seq_num)
        layers.sums(input=[self.instance_error, wrong], out=self.instance_error)
        self.metrics.append(total_distance)
        self.metrics.append(wrong)

    def eval(self, executor, eval_program=None):
        if eval_program is None:
            eval_program = Program()
        block = eval_program.current_block()
        with program_guard(main_program=eval_program):
            total = _state_view(block, self.total_distance)
            seqs = layers.cast(x=_state_view(block, self.seq_num), dtype="float32")
            wrong = layers.cast(x=_state_view(block, self.instance_error), dtype="float32")
            avg_distance = layers.elementwise_div(x=total, y=seqs)
            avg_error = layers.elementwise_div(x=wrong, y=seqs)
            result = executor.run(eval_program, fetch_list=[avg_distance, avg_error])
        return np.array(result[0]), np.array(result[1])

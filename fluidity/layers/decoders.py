"""Fluid 1.6-1.8's decoding API: `Decoder` (the interface), `BeamSearchDecoder`,
`dynamic_decode`, the decode helpers (`DecodeHelper`, `TrainingHelper`,
`GreedyEmbeddingHelper`, `SampleEmbeddingHelper`) and `BasicDecoder`.

`dynamic_decode` runs `decoder.step` in a `While` loop until every batch entry has finished
or `max_step_num` is passed, as Fluid does: the step counter, the finished flags and the
lengths are outer variables the body updates; each step's outputs are written to tensor
arrays, stacked along time after the loop (`tensor_array_to_tensor`). For training
(`is_test=False`) the inputs and states of every step are kept in tensor arrays too, so the
loop can be differentiated; with `is_test=True` they are overwritten in place.

`BeamSearchDecoder` keeps `beam_size` hypotheses per batch entry as [batch, beam, ...]
tensors. Each step it scores every (beam, token) continuation with the accumulated log
probability (a finished beam can only continue with the end token, at no cost), keeps the
best `beam_size` of the batch entry's beam * vocab candidates (`topk`), and gathers the
cell states, finished flags and lengths of the beams they extend (`gather_nd`). `finalize`
walks the parent pointers back (`gather_tree`), giving the token ids of every kept beam,
best first."""
import collections

import numpy as np

from ..core.dtypes import VarType
from ..framework import Variable, default_main_program
from .utils import flatten, map_structure

__all__ = ["Decoder", "BeamSearchDecoder", "dynamic_decode", "DecodeHelper", "TrainingHelper",
           "GreedyEmbeddingHelper", "SampleEmbeddingHelper", "BasicDecoder"]


def _layers():
    from .. import layers
    return layers


class Decoder:
    """The interface `dynamic_decode` drives:

    1. `initialize(inits)` -> (initial_inputs, initial_states, finished), once before the
       loop (finished: a bool tensor, one flag per batch entry);
    2. `step(time, inputs, states, **kwargs)` -> (outputs, next_states, next_inputs,
       finished), once per step;
    3. `finalize(outputs, final_states, sequence_lengths)` -> (final_outputs, final_states),
       once after the loop, if the decoder has one.
    """

    def initialize(self, inits):
        """(initial_inputs, initial_states, finished)."""
        raise NotImplementedError

    def step(self, time, inputs, states, **kwargs):
        """(outputs, next_states, next_inputs, finished) of step `time` (an int64 [1])."""
        raise NotImplementedError

    def finalize(self, outputs, final_states, sequence_lengths):
        """(final_outputs, final_states) from the stacked outputs [time, batch, ...]."""
        raise NotImplementedError

    @property
    def tracks_own_finished(self):
        """False: dynamic_decode ORs each step's finished flags into the ones it keeps. A
        decoder that reorders its batch entries (beam search) keeps them itself: True."""
        return False


class BeamSearchDecoder(Decoder):
    """Beam search over a cell: `cell` gives the next-token logits (after `output_fn`, if
    given) for the [batch * beam] hypotheses; the selected ids go through `embedding_fn`
    (if given) to become the next inputs. Tensors of shape [batch, ...] that the cell reads
    (an attention's encoder output) must be tiled first with
    `BeamSearchDecoder.tile_beam_merge_with_batch(x, beam_size)`.

    Each step's outputs are OutputWrapper(scores, predicted_ids, parent_ids), each [batch,
    beam]; the states are StateWrapper(cell_states, log_probs, finished, lengths). After
    `dynamic_decode`, the outputs are the predicted ids [batch, time, beam] (time-major with
    output_time_major), beam 0 the best."""

    class OutputWrapper(collections.namedtuple("OutputWrapper",
                                               ("scores", "predicted_ids", "parent_ids"))):
        """A step's outputs: scores, predicted_ids, parent_ids, each [batch, beam]."""

    class StateWrapper(collections.namedtuple(
            "StateWrapper", ("cell_states", "log_probs", "finished", "lengths"))):
        """A step's states: the cell's (each [batch, beam, ...]), and [batch, beam]
        log_probs (float32), finished (bool) and lengths (int64)."""

    def __init__(self, cell, start_token, end_token, beam_size, embedding_fn=None,
                 output_fn=None):
        for arg, v in (("start_token", start_token), ("end_token", end_token)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"BeamSearchDecoder: {arg} must be a non-negative int, got "
                                 f"{v!r}")
        if isinstance(beam_size, bool) or not isinstance(beam_size, (int, np.integer)) \
                or beam_size <= 0:
            raise ValueError(f"BeamSearchDecoder: beam_size must be a positive int, got "
                             f"{beam_size!r}")
        self.cell = cell
        self.embedding_fn = embedding_fn
        self.output_fn = output_fn
        self.start_token = int(start_token)
        self.end_token = int(end_token)
        self.beam_size = int(beam_size)

    @staticmethod
    def tile_beam_merge_with_batch(x, beam_size):
        """x [batch, ...] -> [batch * beam_size, ...], each entry repeated beam_size times
        in a row (t[0], t[0], ..., t[1], t[1], ...)."""
        L = _layers()
        x = L.unsqueeze(x, [1])                                      # [batch, 1, ...]
        times = [1] * len(x.shape)
        times[1] = beam_size
        x = L.expand(x, times)                                       # [batch, beam, ...]
        x = L.transpose(x, list(range(2, len(x.shape))) + [0, 1])    # [..., batch, beam]
        # 0 copies a dim, so that unknown dims (a time dim) stay as they are
        x = L.reshape(x, shape=[0] * (len(x.shape) - 2) + [-1])      # [..., batch * beam]
        return L.transpose(x, [len(x.shape) - 1] + list(range(len(x.shape) - 1)))

    def _split_batch_beams(self, x):
        """[batch * beam, ...] -> [batch, beam, ...]."""
        return _layers().reshape(x, shape=[-1, self.beam_size] + list(x.shape[1:]))

    def _merge_batch_beams(self, x):
        """[batch, beam, ...] -> [batch * beam, ...]."""
        return _layers().reshape(x, shape=[-1] + list(x.shape[2:]))

    def _expand_to_beam_size(self, x):
        """[batch, ...] -> [batch, beam, ...] (each entry repeated)."""
        L = _layers()
        x = L.unsqueeze(x, [1])
        times = [1] * len(x.shape)
        times[1] = self.beam_size
        return L.expand(x, times)

    def _mask_probs(self, probs, finished):
        """Log probs [batch, beam, vocab] where a finished beam puts all its mass on the
        end token (log prob 0 there, -1e9 elsewhere); the others unchanged."""
        L = _layers()
        finished = L.cast(finished, dtype=probs.dtype)
        return L.elementwise_sub(
            L.elementwise_mul(L.expand(L.unsqueeze(finished, [2]), [1, 1, self.vocab_size]),
                              self.noend_mask_tensor, axis=-1),
            L.elementwise_mul(probs, finished - 1, axis=0))

    def _gather(self, x, indices, batch_size):
        """x [batch, beam, ...] gathered along beam by indices [batch, beam] (int64)."""
        L = _layers()
        if batch_size.dtype != indices.dtype:
            batch_size = L.cast(batch_size, indices.dtype)
        batch_size.stop_gradient = True
        batch_pos = L.expand(L.unsqueeze(L.range(0, batch_size, 1, dtype=indices.dtype), [1]),
                             [1, self.beam_size])
        coordinates = L.stack([batch_pos, indices], axis=2)
        coordinates.stop_gradient = True
        return L.gather_nd(x, coordinates)

    def initialize(self, initial_cell_states):
        """(start tokens [batch, beam] (embedded), StateWrapper, finished [batch, beam]):
        every beam starts from the same cell states; only beam 0 has log prob 0 (the others
        -1e9), so the first step's top beams are distinct continuations."""
        L = _layers()
        self.kinf = 1e9
        states = flatten(initial_cell_states)
        if not states or not isinstance(states[0], Variable):
            raise TypeError(f"BeamSearchDecoder.initialize: initial_cell_states must be a "
                            f"Variable or a nesting of them, got {initial_cell_states!r}")
        state = states[0]
        self.batch_size = L.shape(state)[0]
        self.start_token_tensor = L.fill_constant(shape=[1], dtype="int64",
                                                  value=self.start_token)
        self.end_token_tensor = L.fill_constant(shape=[1], dtype="int64", value=self.end_token)
        init_cell_states = map_structure(self._expand_to_beam_size, initial_cell_states)
        init_inputs = L.expand(L.unsqueeze(L.expand(self.start_token_tensor, [self.batch_size]),
                                           [1]), [1, self.beam_size])
        log_probs = L.expand(
            L.assign(np.array([[0.0] + [-self.kinf] * (self.beam_size - 1)], "float32")),
            [self.batch_size, 1])
        init_finished = L.fill_constant_batch_size_like(
            input=state, shape=[-1, self.beam_size], dtype="bool", value=False,
            force_cpu=True)
        init_lengths = L.zeros_like(init_inputs)
        if self.embedding_fn is not None:
            init_inputs = self.embedding_fn(init_inputs)
        return (init_inputs, self.StateWrapper(init_cell_states, log_probs, init_finished,
                                               init_lengths), init_finished)

    def _beam_search_step(self, time, logits, next_cell_states, beam_state):
        """(OutputWrapper, StateWrapper) of one step from the logits [batch, beam, vocab]."""
        L = _layers()
        self.vocab_size = logits.shape[-1]
        if self.vocab_size is None or self.vocab_size <= 0:
            raise ValueError(f"BeamSearchDecoder: the vocabulary size (the last dim of the "
                             f"logits '{logits.name}') must be known, got shape "
                             f"{list(logits.shape)}")
        if not 0 <= self.end_token < self.vocab_size:
            raise ValueError(f"BeamSearchDecoder: end_token {self.end_token} is not in the "
                             f"vocabulary of {self.vocab_size} (logits '{logits.name}')")
        self.vocab_size_tensor = L.fill_constant(shape=[1], dtype="int64",
                                                 value=self.vocab_size)
        noend = np.full([self.vocab_size], -self.kinf, "float32")
        noend[self.end_token] = 0
        self.noend_mask_tensor = L.assign(noend)
        step_log_probs = self._mask_probs(L.log(L.softmax(logits)), beam_state.finished)
        log_probs = L.elementwise_add(x=step_log_probs, y=beam_state.log_probs, axis=0)
        scores = L.reshape(log_probs, [-1, self.beam_size * self.vocab_size])
        topk_scores, topk_indices = L.topk(input=scores, k=self.beam_size)
        beam_indices = L.elementwise_floordiv(topk_indices, self.vocab_size_tensor)
        token_indices = L.elementwise_mod(topk_indices, self.vocab_size_tensor)
        next_log_probs = self._gather(
            L.reshape(log_probs, [-1, self.beam_size * self.vocab_size]), topk_indices,
            self.batch_size)
        next_cell_states = map_structure(
            lambda x: self._gather(x, beam_indices, self.batch_size), next_cell_states)
        next_finished = self._gather(beam_state.finished, beam_indices, self.batch_size)
        next_lengths = self._gather(beam_state.lengths, beam_indices, self.batch_size)
        next_lengths = next_lengths + L.cast(L.logical_not(next_finished),
                                             beam_state.lengths.dtype)
        next_finished = L.logical_or(next_finished,
                                     L.equal(token_indices, self.end_token_tensor))
        return (self.OutputWrapper(topk_scores, token_indices, beam_indices),
                self.StateWrapper(next_cell_states, next_log_probs, next_finished,
                                  next_lengths))

    def step(self, time, inputs, states, **kwargs):
        """(OutputWrapper, StateWrapper, next inputs, finished) of one step; kwargs go to
        the cell."""
        inputs = map_structure(self._merge_batch_beams, inputs)
        cell_states = map_structure(self._merge_batch_beams, states.cell_states)
        cell_outputs, next_cell_states = self.cell(inputs, cell_states, **kwargs)
        cell_outputs = map_structure(self._split_batch_beams, cell_outputs)
        next_cell_states = map_structure(self._split_batch_beams, next_cell_states)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        output, state = self._beam_search_step(time=time, logits=cell_outputs,
                                               next_cell_states=next_cell_states,
                                               beam_state=states)
        sample_ids = output.predicted_ids
        sample_ids.stop_gradient = True
        next_inputs = self.embedding_fn(sample_ids) if self.embedding_fn else sample_ids
        return output, state, next_inputs, state.finished

    def finalize(self, outputs, final_states, sequence_lengths):
        """(predicted ids [time, batch, beam] along each kept beam, final_states)."""
        return _layers().gather_tree(outputs.predicted_ids, outputs.parent_ids), final_states

    @property
    def tracks_own_finished(self):
        return True


def _in_block(program, idx, fn, *args):
    """fn(*args) building into block `idx` of `program` (then back to the current one)."""
    cur = program.current_block_idx
    program.current_block_idx = idx
    try:
        return fn(*args)
    finally:
        program.current_block_idx = cur


def _keep_finished_state(state, new_state, finished):
    """state where `finished`, new_state elsewhere (bool states through float)."""
    L = _layers()
    dtype = state.dtype
    if dtype == VarType.BOOL:
        state, new_state = L.cast(state, "float32"), L.cast(new_state, "float32")
    mask = finished
    if mask.dtype != state.dtype:
        mask = L.cast(mask, dtype=state.dtype)
        mask.stop_gradient = True
    out = L.elementwise_sub(L.elementwise_mul(state, mask, axis=0),
                            L.elementwise_mul(new_state, mask - 1, axis=0))
    return L.cast(out, dtype=dtype) if dtype == VarType.BOOL else out


def dynamic_decode(decoder, inits=None, max_step_num=None, output_time_major=False,
                   impute_finished=False, is_test=False, return_length=False, **kwargs):
    """Run `decoder` step by step until every batch entry has finished, or until the step
    counter passes `max_step_num` (then max_step_num + 1 steps have run, as in Fluid).

    Returns (final_outputs, final_states), and the decoded lengths ([batch] or [batch,
    beam], int64) with return_length. final_outputs are the steps' outputs stacked along
    time ([batch, time, ...]; [time, batch, ...] with output_time_major), after
    `decoder.finalize` where the decoder has one. With impute_finished, a finished entry's
    states stop changing. kwargs go to `decoder.step`."""
    L = _layers()
    if not callable(getattr(decoder, "initialize", None)) or \
            not callable(getattr(decoder, "step", None)):
        raise TypeError(f"dynamic_decode: decoder must be a Decoder (initialize, step), got "
                        f"{type(decoder).__name__}")
    if max_step_num is not None and (isinstance(max_step_num, bool) or
                                     not isinstance(max_step_num, (int, np.integer))
                                     or max_step_num < 0):
        raise ValueError(f"dynamic_decode: max_step_num must be a non-negative int or None, "
                         f"got {max_step_num!r}")
    initial_inputs, initial_states, initial_finished = decoder.initialize(inits)
    if not isinstance(initial_finished, Variable) or initial_finished.dtype != VarType.BOOL:
        raise TypeError("dynamic_decode: decoder.initialize must return a bool Variable as "
                        "its finished flags")
    global_inputs, global_states, global_finished = (initial_inputs, initial_states,
                                                     initial_finished)
    global_finished.stop_gradient = True
    step_idx = L.fill_constant(shape=[1], dtype="int64", value=0)
    cond = L.logical_not(L.reduce_all(initial_finished))
    if max_step_num is not None:
        max_step_num = L.fill_constant(shape=[1], dtype="int64", value=int(max_step_num))
    while_op = L.While(cond, is_test=is_test)

    sequence_lengths = L.cast(L.zeros_like(initial_finished), "int64")
    sequence_lengths.stop_gradient = True

    if is_test:   # the loop overwrites the inputs and states in place
        inputs = map_structure(lambda x: x, initial_inputs)
        states = map_structure(lambda x: x, initial_states)
    else:         # every step's inputs and states kept for the backward pass
        inputs_arrays = map_structure(lambda x: L.array_write(x, step_idx), initial_inputs)
        states_arrays = map_structure(lambda x: L.array_write(x, step_idx), initial_states)

    program = default_main_program()
    parent_idx = program.current_block_idx
    with while_op.block():
        if not is_test:
            inputs = map_structure(lambda a: L.array_read(a, step_idx), inputs_arrays)
            states = map_structure(lambda a: L.array_read(a, step_idx), states_arrays)
        outputs, next_states, next_inputs, next_finished = decoder.step(
            step_idx, inputs, states, **kwargs)
        if not decoder.tracks_own_finished:
            next_finished = L.logical_or(next_finished, global_finished)
        next_sequence_lengths = L.elementwise_add(
            sequence_lengths,
            L.cast(L.logical_not(global_finished), sequence_lengths.dtype))
        if impute_finished:
            next_states = map_structure(
                lambda x, y: _keep_finished_state(x, y, global_finished), states, next_states)
        # the output arrays live outside the loop (their dtypes are known only now)
        outputs_arrays = map_structure(
            lambda x: _in_block(program, parent_idx, L.create_array, x.dtype), outputs)
        map_structure(lambda x, a: L.array_write(x, i=step_idx, array=a), outputs,
                      outputs_arrays)
        L.increment(x=step_idx, value=1.0, in_place=True)
        # finished first: the decoder's states may hold it too
        L.assign(next_finished, global_finished)
        L.assign(next_sequence_lengths, sequence_lengths)
        if is_test:
            map_structure(L.assign, next_inputs, global_inputs)
            map_structure(L.assign, next_states, global_states)
        else:
            map_structure(lambda x, a: L.array_write(x, i=step_idx, array=a), next_inputs,
                          inputs_arrays)
            map_structure(lambda x, a: L.array_write(x, i=step_idx, array=a), next_states,
                          states_arrays)
        if max_step_num is not None:
            L.logical_and(L.logical_not(L.reduce_all(global_finished)),
                          L.less_equal(step_idx, max_step_num), cond)
        else:
            L.logical_not(L.reduce_all(global_finished), cond)

    final_outputs = map_structure(
        lambda a: L.tensor_array_to_tensor(a, axis=0, use_stack=True)[0], outputs_arrays)
    if is_test:
        final_states = global_states
    else:
        final_states = map_structure(lambda a: L.array_read(a, step_idx), states_arrays)
    try:
        final_outputs, final_states = decoder.finalize(final_outputs, final_states,
                                                       sequence_lengths)
    except NotImplementedError:
        pass
    if not output_time_major:
        final_outputs = map_structure(
            lambda x: L.transpose(x, [1, 0] + list(range(2, len(x.shape)))), final_outputs)
    if return_length:
        return final_outputs, final_states, sequence_lengths
    return final_outputs, final_states


class DecodeHelper:
    """What BasicDecoder asks of a helper: the first inputs, how to sample a step's ids, and
    the next inputs."""

    def initialize(self):
        """(initial_inputs, initial_finished [batch])."""
        pass

    def sample(self, time, outputs, states):
        """The sampled ids (int64 [batch]) of a step's outputs."""
        pass

    def next_inputs(self, time, outputs, states, sample_ids):
        """(finished [batch], next_inputs, next_states)."""
        pass


class TrainingHelper(DecodeHelper):
    """Teacher forcing: the input of step t is step t of `inputs` ([batch, time, ...], or
    [time, batch, ...] with time_major); entry b has finished once t + 1 reaches
    sequence_length[b]. `sample` is the arg max of the outputs."""

    def __init__(self, inputs, sequence_length, time_major=False):
        L = _layers()
        if not isinstance(sequence_length, Variable):
            raise TypeError(f"TrainingHelper: sequence_length must be a Variable, got "
                            f"{type(sequence_length).__name__}")
        self.inputs = inputs
        self.sequence_length = sequence_length
        self.time_major = time_major
        # one more step of padding, so the read past the last step stays in range
        self.inputs_ = map_structure(
            lambda x: L.pad(x, paddings=([0, 1] + [0, 0] * (len(x.shape) - 1)) if time_major
                            else ([0, 0, 0, 1] + [0, 0] * (len(x.shape) - 2))),
            self.inputs)

    def initialize(self):
        L = _layers()
        init_finished = L.equal(
            self.sequence_length,
            L.fill_constant(shape=[1], dtype=self.sequence_length.dtype, value=0))
        init_inputs = map_structure(lambda x: x[0] if self.time_major else x[:, 0],
                                    self.inputs)
        return init_inputs, init_finished

    def sample(self, time, outputs, states):
        return _layers().argmax(outputs, axis=-1)

    def next_inputs(self, time, outputs, states, sample_ids):
        L = _layers()
        if time.dtype != VarType.INT32:
            time = L.cast(time, "int32")
        length = self.sequence_length
        if length.dtype != time.dtype:
            length = L.cast(length, time.dtype)
        next_time = time + 1
        finished = L.less_equal(length, next_time)
        axes = [0 if self.time_major else 1]

        def _slice(x):
            return L.squeeze(L.slice(x, axes=axes, starts=[next_time], ends=[next_time + 1]),
                             axes=axes)
        return finished, map_structure(_slice, self.inputs_), states


class GreedyEmbeddingHelper(DecodeHelper):
    """Greedy decoding: the arg max of each step's outputs, embedded by `embedding_fn`, is
    the next input; an entry finishes when it emits `end_token`. `start_tokens` is an int64
    [batch] tensor."""

    def __init__(self, embedding_fn, start_tokens, end_token):
        if not callable(embedding_fn):
            raise TypeError("GreedyEmbeddingHelper: embedding_fn must be callable")
        if not isinstance(start_tokens, Variable):
            raise TypeError(f"GreedyEmbeddingHelper: start_tokens must be a Variable ([batch] "
                            f"int64), got {type(start_tokens).__name__}")
        self.embedding_fn = embedding_fn
        self.start_tokens = start_tokens
        self.end_token = _layers().fill_constant(shape=[1], dtype="int64", value=end_token)

    def initialize(self):
        init_finished = _layers().fill_constant_batch_size_like(
            input=self.start_tokens, shape=[-1], dtype="bool", value=False, force_cpu=True)
        return self.embedding_fn(self.start_tokens), init_finished

    def sample(self, time, outputs, states):
        return _layers().argmax(outputs, axis=-1)

    def next_inputs(self, time, outputs, states, sample_ids):
        finished = _layers().equal(sample_ids, self.end_token)
        return finished, self.embedding_fn(sample_ids), states


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """GreedyEmbeddingHelper that samples each step's ids from softmax(outputs /
    softmax_temperature) (op sampling_id) instead of taking the arg max."""

    def __init__(self, embedding_fn, start_tokens, end_token, softmax_temperature=None,
                 seed=None):
        super().__init__(embedding_fn, start_tokens, end_token)
        if softmax_temperature is not None and not softmax_temperature > 0:
            raise ValueError(f"SampleEmbeddingHelper: softmax_temperature must be > 0, got "
                             f"{softmax_temperature!r}")
        self.softmax_temperature = _layers().fill_constant(
            shape=[1], dtype="float32", value=softmax_temperature) \
            if softmax_temperature is not None else None
        self.seed = seed

    def sample(self, time, outputs, states):
        L = _layers()
        logits = outputs / self.softmax_temperature if self.softmax_temperature is not None \
            else outputs
        probs = L.softmax(logits)
        probs.stop_gradient = True    # sampling_id has no gradient
        return L.sampling_id(probs, seed=self.seed or 0, dtype=self.start_tokens.dtype)


class BasicDecoder(Decoder):
    """A cell and a DecodeHelper: each step runs the cell (then `output_fn`), samples ids
    with the helper and takes the next inputs from it. Outputs are
    OutputWrapper(cell_outputs, sample_ids)."""

    class OutputWrapper(collections.namedtuple("OutputWrapper",
                                               ("cell_outputs", "sample_ids"))):
        """A step's outputs: the cell's (after output_fn) and the sampled ids."""

    def __init__(self, cell, helper, output_fn=None):
        self.cell = cell
        self.helper = helper
        self.output_fn = output_fn

    def initialize(self, initial_cell_states):
        initial_inputs, initial_finished = self.helper.initialize()
        return initial_inputs, initial_cell_states, initial_finished

    def step(self, time, inputs, states, **kwargs):
        cell_outputs, cell_states = self.cell(inputs, states, **kwargs)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        sample_ids = self.helper.sample(time=time, outputs=cell_outputs, states=cell_states)
        sample_ids.stop_gradient = True
        finished, next_inputs, next_states = self.helper.next_inputs(
            time=time, outputs=cell_outputs, states=cell_states, sample_ids=sample_ids)
        return self.OutputWrapper(cell_outputs, sample_ids), next_states, next_inputs, finished

"""Fluid 1.0-1.5's `fluid.contrib.decoder.beam_search_decoder`: an RNN decoder written once
as a `StateCell` (named states, named step inputs and an updater function) that runs either
for training, as a `TrainingDecoder` (a `DynamicRNN` over the target sequences, the states
its memories), or for inference, as a `BeamSearchDecoder` (a `While` loop over LoD beams:
the states and the previous ids/scores live in tensor arrays, each step expands the states to
the beams, scores the vocabulary, `topk`, `beam_search`, and the beams of every step are
joined into sentences by `beam_search_decode`).

    h = InitState(init=encoder_out, need_reorder=True)
    cell = StateCell(inputs={'x': None}, states={'h': h}, out_state='h')

    @cell.state_updater
    def updater(cell):
        cell.set_state('h', layers.fc([cell.get_state('h'), cell.get_input('x')], H,
                                      act='tanh'))

    decoder = TrainingDecoder(cell)              # or BeamSearchDecoder(cell, init_ids, ...)
    with decoder.block():
        word = decoder.step_input(trg_embedding)
        decoder.state_cell.compute_state(inputs={'x': word})
        decoder.state_cell.update_states()
        decoder.output(layers.fc(decoder.state_cell.get_state('h'), V, act='softmax'))
    scores = decoder()
"""
import contextlib

from ... import layers, unique_name
from ...core.dtypes import VarType
from ...framework import Variable, default_main_program
from ...layer_helper import LayerHelper

__all__ = ["InitState", "StateCell", "TrainingDecoder", "BeamSearchDecoder"]


class _DecoderType:
    TRAINING = 1
    BEAM_SEARCH = 2


class InitState:
    """The initial value of a state: `init`, or a tensor of `shape` filled with `value`
    whose batch size is `init_boot`'s. `need_reorder`: `init` is in the input's sequence
    order and must follow the training decoder's reordering by length (use it when the
    batch has more than one sequence)."""

    def __init__(self, init=None, shape=None, value=0.0, init_boot=None, need_reorder=False,
                 dtype="float32"):
        if init is not None:
            if not isinstance(init, Variable):
                raise TypeError(f"InitState: init must be a Variable, got "
                                f"{type(init).__name__}")
            self._init = init
        elif init_boot is None:
            raise ValueError("init_boot must be provided to infer the shape of InitState .\n")
        else:
            if shape is None:
                raise ValueError("InitState: give `shape` (with init_boot) when init is None")
            self._init = layers.fill_constant_batch_size_like(input=init_boot, value=value,
                                                              shape=shape, dtype=dtype)
        self._shape = shape
        self._value = value
        self._need_reorder = need_reorder
        self._dtype = dtype

    @property
    def value(self):
        return self._init

    @property
    def need_reorder(self):
        return self._need_reorder


class _MemoryState:
    """A state kept as a DynamicRNN memory (training)."""

    def __init__(self, state_name, rnn_obj, init_state):
        self._state_name = state_name
        self._rnn_obj = rnn_obj
        self._state_mem = rnn_obj.memory(init=init_state.value,
                                         need_reorder=init_state.need_reorder)

    def get_state(self):
        return self._state_mem

    def update_state(self, state):
        self._rnn_obj.update_memory(self._state_mem, state)


class _ArrayState:
    """A state kept in a tensor array indexed by its own counter (beam search)."""

    def __init__(self, state_name, block, init_state):
        self._state_name = state_name
        self._block = block
        self._state_array = block.create_var(
            name=unique_name.generate("array_state_array"), type=VarType.LOD_TENSOR_ARRAY,
            dtype=init_state.value.dtype)
        self._counter = block.create_var(name=unique_name.generate("array_state_counter"),
                                         type=VarType.LOD_TENSOR, dtype="int64", shape=[1])
        block.append_op("fill_constant", outputs={"Out": [self._counter]},
                        attrs={"shape": [1], "dtype": self._counter.dtype, "value": 0.0,
                               "force_cpu": True})
        self._counter.stop_gradient = True
        block.append_op("write_to_array", inputs={"X": init_state.value, "I": self._counter},
                        outputs={"Out": self._state_array})

    def get_state(self):
        return layers.array_read(array=self._state_array, i=self._counter)

    def update_state(self, state):
        layers.increment(x=self._counter, value=1, in_place=True)
        layers.array_write(state, array=self._state_array, i=self._counter)


class StateCell:
    """The states (name -> InitState) and step inputs (name -> Variable, or None to be set
    at each step) of an RNN cell, and its updater (`state_updater`), which computes the new
    states from `get_state` / `get_input` and stores them with `set_state`. `out_state`
    names the state the beam search scores."""

    def __init__(self, inputs, states, out_state, name=None):
        self._helper = LayerHelper("state_cell", name=name)
        self._cur_states = {}
        self._state_names = []
        for state_name, state in states.items():
            if not isinstance(state, InitState):
                raise ValueError("state must be an InitState object.")
            self._cur_states[state_name] = state
            self._state_names.append(state_name)
        self._inputs = inputs
        self._cur_decoder_obj = None
        self._in_decoder = False
        self._states_holder = {}
        self._switched_decoder = False
        self._state_updater = None
        self._out_state = out_state
        if self._out_state not in self._cur_states:
            raise ValueError("out_state must be one state in states")

    def _enter_decoder(self, decoder_obj):
        if self._in_decoder or self._cur_decoder_obj is not None:
            raise ValueError("StateCell has already entered a decoder.")
        self._in_decoder = True
        self._cur_decoder_obj = decoder_obj
        self._switched_decoder = False

    def _leave_decoder(self, decoder_obj):
        if not self._in_decoder:
            raise ValueError("StateCell not in decoder, invalid leaving operation.")
        if self._cur_decoder_obj != decoder_obj:
            raise ValueError("Inconsistent decoder object in StateCell.")
        self._in_decoder = False
        self._cur_decoder_obj = None
        self._switched_decoder = False

    def _switch_decoder(self):
        """Make each state the decoder's kind of state (memory or array), on first use."""
        if not self._in_decoder:
            raise ValueError("StateCell must be enter a decoder.")
        if self._switched_decoder:
            raise ValueError("StateCell already done switching.")
        decoder = self._cur_decoder_obj
        for state_name in self._state_names:
            if state_name not in self._states_holder:
                state = self._cur_states[state_name]
                if not isinstance(state, InitState):
                    raise ValueError(f"Current type of state is {type(state)}, should be an "
                                     f"InitState object.")
                self._states_holder[state_name] = {}
                if decoder.type == _DecoderType.TRAINING:
                    held = _MemoryState(state_name, decoder.dynamic_rnn, state)
                elif decoder.type == _DecoderType.BEAM_SEARCH:
                    held = _ArrayState(state_name, decoder._parent_block(), state)
                else:
                    raise ValueError("Unknown decoder type, only support [TRAINING, "
                                     "BEAM_SEARCH]")
                self._states_holder[state_name][id(decoder)] = held
            self._cur_states[state_name] = \
                self._states_holder[state_name][id(decoder)].get_state()
        self._switched_decoder = True

    def get_state(self, state_name):
        """The current value of state `state_name`."""
        if self._in_decoder and not self._switched_decoder:
            self._switch_decoder()
        if state_name not in self._cur_states:
            raise ValueError(f"Unknown state {state_name}. Please make sure _switch_decoder() "
                             f"invoked.")
        return self._cur_states[state_name]

    def get_input(self, input_name):
        """The step input `input_name` (set by compute_state)."""
        if input_name not in self._inputs or self._inputs[input_name] is None:
            raise ValueError(f"Invalid input {input_name}.")
        return self._inputs[input_name]

    def set_state(self, state_name, state_value):
        """Make `state_value` the current value of state `state_name`."""
        self._cur_states[state_name] = state_value

    def state_updater(self, updater):
        """Use `updater(state_cell)` to compute the new states (a decorator)."""
        self._state_updater = updater

        def _decorator(state_cell):
            if state_cell == self:
                raise TypeError("Updater should only accept a StateCell object as argument.")
            updater(state_cell)
        return _decorator

    def compute_state(self, inputs):
        """Set the step inputs (name -> Variable) and run the updater."""
        if self._in_decoder and not self._switched_decoder:
            self._switch_decoder()
        for input_name, input_value in inputs.items():
            if input_name not in self._inputs:
                raise ValueError(f"Unknown input {input_name}. Please make sure {input_name} "
                                 f"in input place holder.")
            self._inputs[input_name] = input_value
        if self._state_updater is None:
            raise ValueError("StateCell has no updater: decorate one with state_updater")
        self._state_updater(self)

    def update_states(self):
        """Record the current states as the next step's."""
        if self._in_decoder and not self._switched_decoder:
            self._switch_decoder()
        for state_name, decoder_state in self._states_holder.items():
            if id(self._cur_decoder_obj) not in decoder_state:
                raise ValueError("Unknown decoder object, please make sure switch_decoder "
                                 "been invoked.")
            decoder_state[id(self._cur_decoder_obj)].update_state(self._cur_states[state_name])

    def out_state(self):
        """The value of the output state (after update_states)."""
        return self._cur_states[self._out_state]


class TrainingDecoder:
    """Training with a StateCell: a DynamicRNN over the target sequences (LoD), the cell's
    states its memories. Build the step in `with decoder.block():`; `decoder()` returns the
    outputs as LoD tensors."""
    BEFORE_DECODER = 0
    IN_DECODER = 1
    AFTER_DECODER = 2

    def __init__(self, state_cell, name=None):
        self._helper = LayerHelper("training_decoder", name=name)
        self._status = TrainingDecoder.BEFORE_DECODER
        self._dynamic_rnn = layers.DynamicRNN()
        self._type = _DecoderType.TRAINING
        self._state_cell = state_cell
        self._state_cell._enter_decoder(self)

    @contextlib.contextmanager
    def block(self):
        """The decoder's step (once)."""
        if self._status != TrainingDecoder.BEFORE_DECODER:
            raise ValueError("decoder.block() can only be invoked once")
        self._status = TrainingDecoder.IN_DECODER
        with self._dynamic_rnn.block():
            yield
        self._status = TrainingDecoder.AFTER_DECODER
        self._state_cell._leave_decoder(self)

    @property
    def state_cell(self):
        self._assert_in_decoder_block("state_cell")
        return self._state_cell

    @property
    def dynamic_rnn(self):
        return self._dynamic_rnn

    @property
    def type(self):
        return self._type

    def step_input(self, x):
        """x's entry at the current step (x: a LoD tensor of sequences)."""
        self._assert_in_decoder_block("step_input")
        return self._dynamic_rnn.step_input(x)

    def static_input(self, x):
        """x (one row per sequence) as a whole at every step."""
        self._assert_in_decoder_block("static_input")
        return self._dynamic_rnn.static_input(x)

    def __call__(self, *args, **kwargs):
        if self._status != TrainingDecoder.AFTER_DECODER:
            raise ValueError("Output of training decoder can only be visited outside the "
                             "block.")
        return self._dynamic_rnn(*args, **kwargs)

    def output(self, *outputs):
        """Collect these variables at every step as the decoder's outputs."""
        self._assert_in_decoder_block("output")
        self._dynamic_rnn.output(*outputs)

    def _assert_in_decoder_block(self, method):
        if self._status != TrainingDecoder.IN_DECODER:
            raise ValueError(f"{method} should be invoked inside block of TrainingDecoder "
                             f"object.")


class BeamSearchDecoder:
    """Beam search with a StateCell (inference). `init_ids` / `init_scores` are 2-level LoD
    tensors ([sources -> beams -> one id], the start token with score 1 per source); each
    step embeds the previous ids (an embedding of `target_dict_dim` x `word_dim`), expands
    the states to the beams, runs the updater, scores the vocabulary with a softmax fc over
    the output state, keeps `topk_size` candidates per beam and `beam_size` beams per
    source (`beam_search`), and stops after `max_len` steps or when no beam is left.
    `decode()` builds that loop; `decoder()` returns (sentence ids, sentence scores), LoD
    [sources -> sentences -> words]. Override `decode` (with `block`, `read_array`,
    `update_array`, `early_stop`) for another step."""
    BEFORE_BEAM_SEARCH_DECODER = 0
    IN_BEAM_SEARCH_DECODER = 1
    AFTER_BEAM_SEARCH_DECODER = 2

    def __init__(self, state_cell, init_ids, init_scores, target_dict_dim, word_dim,
                 input_var_dict={}, topk_size=50, sparse_emb=True, max_len=100, beam_size=1,
                 end_id=1, name=None):
        for arg, v in (("target_dict_dim", target_dict_dim), ("word_dim", word_dim),
                       ("topk_size", topk_size), ("max_len", max_len),
                       ("beam_size", beam_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"BeamSearchDecoder: {arg} must be a positive int, got {v!r}")
        self._helper = LayerHelper("beam_search_decoder", name=name)
        self._counter = layers.zeros(shape=[1], dtype="int64")
        self._counter.stop_gradient = True
        self._type = _DecoderType.BEAM_SEARCH
        self._max_len = layers.fill_constant(shape=[1], dtype="int64", value=max_len)
        self._cond = layers.less_than(
            x=self._counter, y=layers.fill_constant(shape=[1], dtype="int64", value=max_len))
        self._while_op = layers.While(self._cond)
        self._state_cell = state_cell
        self._state_cell._enter_decoder(self)
        self._status = BeamSearchDecoder.BEFORE_BEAM_SEARCH_DECODER
        self._zero_idx = layers.fill_constant(shape=[1], value=0, dtype="int64",
                                              force_cpu=True)
        self._array_dict = {}
        self._array_link = []
        self._ids_array = None
        self._scores_array = None
        self._beam_size = beam_size
        self._end_id = end_id
        self._init_ids = init_ids
        self._init_scores = init_scores
        self._target_dict_dim = target_dict_dim
        self._topk_size = topk_size
        self._sparse_emb = sparse_emb
        self._word_dim = word_dim
        self._input_var_dict = input_var_dict

    @contextlib.contextmanager
    def block(self):
        """The loop's body (once); after it the counter advances and the arrays given to
        update_array take this step's values."""
        if self._status != BeamSearchDecoder.BEFORE_BEAM_SEARCH_DECODER:
            raise ValueError("block() can only be invoke once.")
        self._status = BeamSearchDecoder.IN_BEAM_SEARCH_DECODER
        with self._while_op.block():
            yield
            with layers.Switch() as switch:
                with switch.case(self._cond):
                    layers.increment(x=self._counter, value=1.0, in_place=True)
                    for value, array in self._array_link:
                        layers.array_write(x=value, i=self._counter, array=array)
                    layers.less_than(x=self._counter, y=self._max_len, cond=self._cond)
        self._status = BeamSearchDecoder.AFTER_BEAM_SEARCH_DECODER
        self._state_cell._leave_decoder(self)

    @property
    def type(self):
        return self._type

    def early_stop(self):
        """Stop the loop after this step (a `break`)."""
        layers.fill_constant(shape=[1], value=0, dtype="bool", force_cpu=True, out=self._cond)

    def decode(self):
        """Build the beam search step (see the class docstring)."""
        with self.block():
            prev_ids = self.read_array(init=self._init_ids, is_ids=True)
            prev_scores = self.read_array(init=self._init_scores, is_scores=True)
            prev_ids_embedding = layers.embedding(
                input=prev_ids, size=[self._target_dict_dim, self._word_dim],
                dtype="float32", is_sparse=self._sparse_emb)
            feed_dict, update_dict = {}, {}
            for init_var_name, init_var in self._input_var_dict.items():
                if init_var_name not in self.state_cell._inputs:
                    raise ValueError(f"Variable {init_var_name} not found in StateCell!\n")
                read_var = self.read_array(init=init_var)
                update_dict[init_var_name] = read_var
                feed_dict[init_var_name] = layers.sequence_expand(read_var, prev_scores)
            for state_str in self._state_cell._state_names:
                prev_state = self.state_cell.get_state(state_str)
                self.state_cell.set_state(state_str,
                                          layers.sequence_expand(prev_state, prev_scores))
            for input_name in self._state_cell._inputs:
                if input_name not in feed_dict:
                    feed_dict[input_name] = prev_ids_embedding
            self.state_cell.compute_state(inputs=feed_dict)
            current_state = self.state_cell.out_state()
            current_state_with_lod = layers.lod_reset(x=current_state, y=prev_scores)
            scores = layers.fc(input=current_state_with_lod, size=self._target_dict_dim,
                               act="softmax")
            topk_scores, topk_indices = layers.topk(scores, k=self._topk_size)
            accu_scores = layers.elementwise_add(
                x=layers.log(x=topk_scores), y=layers.reshape(prev_scores, shape=[-1]),
                axis=0)
            selected_ids, selected_scores = layers.beam_search(
                prev_ids, prev_scores, topk_indices, accu_scores, self._beam_size,
                end_id=self._end_id, level=0)
            with layers.Switch() as switch:
                with switch.case(layers.is_empty(selected_ids)):
                    self.early_stop()
                with switch.default():
                    self.state_cell.update_states()
                    self.update_array(prev_ids, selected_ids)
                    self.update_array(prev_scores, selected_scores)
                    for update_name, var_to_update in update_dict.items():
                        self.update_array(var_to_update, feed_dict[update_name])

    def read_array(self, init, is_ids=False, is_scores=False):
        """The value a tensor array holds at the current step, the array starting with
        `init` (step 0) and taking what update_array gives it."""
        self._assert_in_decoder_block("read_array")
        if is_ids and is_scores:
            raise ValueError("Shouldn't mark current array be ids array and scores array at "
                             "the same time.")
        if not isinstance(init, Variable):
            raise TypeError("The input argument `init` must be a Variable.")
        parent_block = self._parent_block()
        array = parent_block.create_var(name=unique_name.generate("beam_search_decoder_array"),
                                        type=VarType.LOD_TENSOR_ARRAY, dtype=init.dtype)
        parent_block.append_op("write_to_array", inputs={"X": init, "I": self._zero_idx},
                               outputs={"Out": array})
        if is_ids:
            self._ids_array = array
        elif is_scores:
            self._scores_array = array
        read_value = layers.array_read(array=array, i=self._counter)
        self._array_dict[read_value.name] = array
        return read_value

    def update_array(self, array, value):
        """Write `value` to the array `array` (a read_array result) for the next step."""
        self._assert_in_decoder_block("update_array")
        if not isinstance(array, Variable):
            raise TypeError("The input argument `array` of  must be a Variable.")
        if not isinstance(value, Variable):
            raise TypeError("The input argument `value` of must be a Variable.")
        array = self._array_dict.get(array.name, None)
        if array is None:
            raise ValueError("Please invoke read_array before update_array.")
        self._array_link.append((value, array))

    def __call__(self):
        if self._status != BeamSearchDecoder.AFTER_BEAM_SEARCH_DECODER:
            raise ValueError("Output of BeamSearchDecoder object can only be visited outside "
                             "the block.")
        if self._ids_array is None or self._scores_array is None:
            raise ValueError("BeamSearchDecoder: read_array(is_ids=True) and "
                             "read_array(is_scores=True) were never called in the block")
        return layers.beam_search_decode(ids=self._ids_array, scores=self._scores_array,
                                         beam_size=self._beam_size, end_id=self._end_id)

    @property
    def state_cell(self):
        self._assert_in_decoder_block("state_cell")
        return self._state_cell

    def _parent_block(self):
        program = default_main_program()
        parent_idx = program.current_block().parent_idx
        if parent_idx < 0:
            raise ValueError(f"Invalid block with index {parent_idx}.")
        return program.block(parent_idx)

    def _assert_in_decoder_block(self, method):
        if self._status != BeamSearchDecoder.IN_BEAM_SEARCH_DECODER:
            raise ValueError(f"{method} should be invoked inside block of BeamSearchDecoder "
                             f"object.")

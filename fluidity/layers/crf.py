"""Sequence labelling layers (Fluid 1.x signatures): linear_chain_crf, crf_decoding,
chunk_eval. Ops in fluidity/ops/crf.py."""
from ..layer_helper import LayerHelper
from ..ops.crf import CHUNK_SCHEMES
from ..param_attr import ParamAttr
from .checks import check_variables

__all__ = ["linear_chain_crf", "crf_decoding", "chunk_eval"]


def linear_chain_crf(input, label, param_attr=None, length=None):
    """Negative log-likelihood [N, 1] of each sequence's tags under a linear-chain CRF over
    the emissions `input` ([T, D] with LoD, or padded [B, S, D] with `length`). Creates the
    transition parameter [D + 2, D] named by param_attr (crf_decoding reuses it)."""
    check_variables("linear_chain_crf", input=input, label=label)
    helper = LayerHelper("linear_chain_crf", param_attr=param_attr)
    size = input.shape[2] if length is not None else input.shape[1]
    if size is None or size <= 0:
        raise ValueError(f"linear_chain_crf: the last dim of input (the number of tags) "
                         f"must be known, got shape {list(input.shape)}")
    transition = helper.create_parameter(param_attr, [size + 2, size], input.dtype)
    tmps = {s: helper.create_variable_for_type_inference(input.dtype)
            for s in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}
    inputs = {"Emission": input, "Transition": transition, "Label": label}
    if length is not None:
        inputs["Length"] = length
    helper.append_op("linear_chain_crf", inputs=inputs, outputs=tmps)
    return tmps["LogLikelihood"]


def crf_decoding(input, param_attr, label=None, length=None):
    """The Viterbi tag path of the emissions `input` under the transition parameter named
    by `param_attr` (made by linear_chain_crf); with `label`, 1 where they agree."""
    check_variables("crf_decoding", input=input)
    attr = ParamAttr.to_attr(param_attr)
    if attr is None or attr.name is None:
        raise ValueError("crf_decoding: param_attr must name the transition parameter "
                         "(the ParamAttr(name=...) given to linear_chain_crf)")
    helper = LayerHelper("crf_decoding")
    block = helper.main_program.global_block()
    if not block.has_var(attr.name):
        raise ValueError(f"crf_decoding: no parameter '{attr.name}' in the program; create "
                         f"it first with linear_chain_crf(param_attr=...)")
    path = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    inputs = {"Emission": input, "Transition": block.var(attr.name)}
    if label is not None:
        inputs["Label"] = label
    if length is not None:
        inputs["Length"] = length
    helper.append_op("crf_decoding", inputs=inputs, outputs={"ViterbiPath": path})
    return path


def chunk_eval(input, label, chunk_scheme, num_chunk_types, excluded_chunk_types=None,
               seq_length=None):
    """Chunk precision, recall, F1 and the numbers of inferred, labelled and correct chunks
    of tag sequences `input` against `label` (scheme IOB, IOE, IOBES or plain)."""
    if chunk_scheme not in CHUNK_SCHEMES:
        raise ValueError(f"chunk_eval: chunk_scheme must be one of {sorted(CHUNK_SCHEMES)}, "
                         f"got {chunk_scheme!r}")
    helper = LayerHelper("chunk_eval")
    outs = {s: helper.create_variable_for_type_inference(dt, stop_gradient=True)
            for s, dt in (("Precision", "float32"), ("Recall", "float32"),
                          ("F1-Score", "float32"), ("NumInferChunks", "int64"),
                          ("NumLabelChunks", "int64"), ("NumCorrectChunks", "int64"))}
    inputs = {"Inference": input, "Label": label}
    if seq_length is not None:
        inputs["SeqLength"] = seq_length
    helper.append_op("chunk_eval", inputs=inputs, outputs=outs,
                     attrs={"num_chunk_types": int(num_chunk_types),
                            "chunk_scheme": chunk_scheme,
                            "excluded_chunk_types": [int(t) for t in
                                                     excluded_chunk_types or []]})
    return tuple(outs.values())

"""Beam-search layers (Fluid 1.x signatures); ops in fluidity/ops/beam.py."""
from ..core.dtypes import VarType
from ..layer_helper import LayerHelper
from .checks import check_variables

__all__ = ["beam_search", "beam_search_decode", "gather_tree"]


def beam_search(pre_ids, pre_scores, ids, scores, beam_size, end_id, level=0,
                is_accumulated=True, name=None, return_parent_idx=False):
    """One step of beam search over 2-level LoD candidates: (selected_ids, selected_scores)
    and, with return_parent_idx, the prefix row each selection extends."""
    check_variables("beam_search", pre_ids=pre_ids, pre_scores=pre_scores, scores=scores)
    if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size <= 0:
        raise ValueError(f"beam_search: beam_size must be a positive int, got {beam_size!r}")
    helper = LayerHelper("beam_search", name=name)
    inputs = {"pre_ids": pre_ids, "pre_scores": pre_scores, "scores": scores}
    if ids is not None:
        check_variables("beam_search", ids=ids)
        inputs["ids"] = ids
    sel_ids = helper.create_variable_for_type_inference(pre_ids.dtype, stop_gradient=True)
    sel_scores = helper.create_variable_for_type_inference(pre_scores.dtype,
                                                           stop_gradient=True)
    parent = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("beam_search", inputs=inputs,
                     outputs={"selected_ids": sel_ids, "selected_scores": sel_scores,
                              "parent_idx": parent},
                     attrs={"level": level, "beam_size": beam_size, "end_id": end_id,
                            "is_accumulated": is_accumulated})
    return (sel_ids, sel_scores, parent) if return_parent_idx else (sel_ids, sel_scores)


def beam_search_decode(ids, scores, beam_size, end_id, name=None):
    """Tensor arrays of every step's beam_search selections -> (sentence ids, sentence
    scores), LoD [sources -> sentences -> words]."""
    check_variables("beam_search_decode", ids=ids, scores=scores)
    helper = LayerHelper("beam_search_decode", name=name)
    sent_ids = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    sent_scores = helper.create_variable_for_type_inference(scores.dtype, stop_gradient=True)
    helper.append_op("beam_search_decode", inputs={"Ids": ids, "Scores": scores},
                     outputs={"SentenceIds": sent_ids, "SentenceScores": sent_scores},
                     attrs={"beam_size": beam_size, "end_id": end_id})
    return sent_ids, sent_scores


def gather_tree(ids, parents):
    """Fluid 1.8's gather_tree: the whole beams of a fixed-width beam search. `ids` and
    `parents` are int64 (or int32) [max_time, batch, beam]: each step's chosen ids and the
    beam of the previous step each extends. Returns the ids of every step along the path
    that ends at each beam of the last step, [max_time, batch, beam]."""
    check_variables("gather_tree", ids=ids, parents=parents)
    for arg, v in (("ids", ids), ("parents", parents)):
        if v.dtype not in (VarType.INT32, VarType.INT64):
            raise TypeError(f"gather_tree: {arg} must be int32 or int64, got "
                            f"{VarType(v.dtype).name.lower()}")
    helper = LayerHelper("gather_tree")
    out = helper.create_variable_for_type_inference(ids.dtype, stop_gradient=True)
    helper.append_op("gather_tree", inputs={"Ids": ids, "Parents": parents},
                     outputs={"Out": out})
    return out

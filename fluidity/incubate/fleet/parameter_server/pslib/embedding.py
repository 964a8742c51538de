"""pslib's embedding hooks (`fleet_embedding`, `_prepare_params`, `_fleet_embedding[_v2]`,
`FLEET_GLOBAL_DICT`): inside `with fleet_embedding(click_name=...)`, `fluid.layers.embedding`
and `fluid.embedding` register their table with the pslib fleet (one sparse table id per
embedding name, its width and accessor checked against earlier uses) and pull its rows with
pslib's `pull_sparse`.

The registration, its checks and the program built (a `pull_sparse` op per embedding) are
Fluid's; running the pull needs pslib's runtime, which is not part of Fluidity, so the op
refuses to run, as in a Paddle built without pslib."""
import contextlib
import sys


__all__ = ["FLEET_GLOBAL_DICT", "fleet_embedding"]

FLEET_GLOBAL_DICT = {
    "enable": False,            # set by the first registered embedding
    "emb_to_table": {},         # embedding name -> sparse table id
    "emb_to_accessor": {},      # embedding name -> accessor class
    "emb_to_size": {},          # embedding name -> width
    "cur_sparse_id": 0,         # the next table id
    "cur_accessor": "",         # set inside fleet_embedding
    "click_name": "",
    "scale_sparse_grad": None,
}


def _prepare_params(input, size, is_sparse=False, is_distributed=False, padding_idx=None,
                    param_attr=None, dtype="float32"):
    """Check an embedding's arguments and register its table (Fluid's rules: a named
    param_attr, a list/tuple size whose last entry is the width every use agrees on, the
    same accessor, is_sparse and is_distributed set, float32)."""
    if param_attr is None:
        raise ValueError("param_attr must be set")
    name = param_attr.name
    if name is None:
        raise ValueError("embedding name must be set")
    if not isinstance(size, (list, tuple)):
        raise ValueError("embedding size must be list or tuple")
    width = size[-1]
    d = FLEET_GLOBAL_DICT
    d["enable"] = True
    if d["emb_to_size"].setdefault(name, width) != width:
        raise ValueError(f"embedding size error: {width} vs {d['emb_to_size'][name]} "
                         f"(embedding '{name}')")
    accessor = d["cur_accessor"]
    if d["emb_to_accessor"].setdefault(name, accessor) != accessor:
        raise ValueError(f"embedding accessor error: {d['emb_to_accessor'][name]} vs "
                         f"{accessor} (embedding '{name}')")
    if name not in d["emb_to_table"]:
        d["emb_to_table"][name] = d["cur_sparse_id"]
        d["cur_sparse_id"] += 1
    if not is_sparse:
        raise ValueError("is_sparse must be True")
    if not is_distributed:
        raise ValueError("is_distributed must be True")
    if dtype != "float32":
        raise ValueError("dtype must be float32")


def _pull(op_type, input, size, table_id, accessor_class, name, ctr_label_name, padding_id,
          dtype, scale_sparse_grad):
    """Append a pull_sparse(_v2) op (Fluid's `layers.nn._pull_sparse`): its W is a [size]
    placeholder named after the embedding, as Fluid keeps for the embedding's name."""
    from .....layer_helper import LayerHelper
    from .....framework import Variable
    helper = LayerHelper(name)
    inputs = input if isinstance(input, (list, tuple)) else [input]
    if not inputs or not all(isinstance(v, Variable) for v in inputs):
        raise TypeError(f"{op_type}: input must be a Variable or a list of Variables")
    outs = [helper.create_variable_for_type_inference(dtype)]     # (one, as Fluid's)
    block = helper.main_program.global_block()
    w = block.vars.get(name) or block.create_var(name=name, shape=[size], dtype=dtype,
                                                 persistable=True)
    helper.append_op(op_type, inputs={"Ids": list(inputs), "W": [w]}, outputs={"Out": outs},
                     attrs={"EmbeddingDim": int(size), "TableId": int(table_id),
                            "AccessorClass": accessor_class, "CtrLabelName": ctr_label_name,
                            "PaddingId": int(padding_id),
                            "ScaleSparseGrad": bool(scale_sparse_grad),
                            "InputNames": [v.name for v in inputs], "is_distributed": True})
    return outs[0] if len(outs) == 1 else outs


def _fleet_embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None,
                     param_attr=None, dtype="float32", _op="pull_sparse"):
    """`fluid.layers.embedding` inside fleet_embedding: checked and registered, then a
    pull_sparse op of the embedding's table."""
    _prepare_params(input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype)
    name = param_attr.name
    d = FLEET_GLOBAL_DICT
    return _pull(_op, input, size[-1], d["emb_to_table"][name], d["emb_to_accessor"][name],
                 name, d["click_name"], 0 if padding_idx is None else padding_idx, dtype,
                 d["scale_sparse_grad"])


def _fleet_embedding_v2(input, size, is_sparse=False, is_distributed=False, padding_idx=None,
                        param_attr=None, dtype="float32"):
    """`fluid.embedding` inside fleet_embedding: as _fleet_embedding, with pull_sparse_v2
    (the ids' shape kept)."""
    return _fleet_embedding(input, size, is_sparse, is_distributed, padding_idx, param_attr,
                            dtype, _op="pull_sparse_v2")


def _package():
    """The loaded top-level package, whose `layers.embedding` and `embedding` the block
    swaps (what a user's `fluid.layers.embedding(...)` call finds)."""
    return sys.modules[__name__.split(".")[0]]


class fleet_embedding(contextlib.ContextDecorator):  # noqa: N801 -- Fluid's name
    """`with fleet_embedding(click_name=label.name):` routes fluid.layers.embedding and
    fluid.embedding through pslib for the block, and restores them after."""

    def __init__(self, click_name, scale_sparse_grad=True):
        self.click_name = "" if click_name is None else click_name
        self.scale_sparse_grad = scale_sparse_grad
        self.accessor = "DownpourCtrAccessor"      # Fluid's default; minimize may change it
        self._saved = None

    def __enter__(self):
        fluid = _package()
        self._saved = (fluid.layers.embedding, fluid.embedding)
        fluid.layers.embedding = _fleet_embedding
        fluid.embedding = _fleet_embedding_v2
        FLEET_GLOBAL_DICT.update(cur_accessor=self.accessor, click_name=self.click_name,
                                 scale_sparse_grad=self.scale_sparse_grad)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        fluid = _package()
        fluid.layers.embedding, fluid.embedding = self._saved
        FLEET_GLOBAL_DICT.update(cur_accessor="", click_name="", scale_sparse_grad=None)
        return False

"""pslib's embedding hooks (`fleet_embedding`, `_prepare_params`, `_fleet_embedding[_v2]`,
`FLEET_GLOBAL_DICT`): inside `with fleet_embedding(click_name=...)`, `fluid.layers.embedding`
and `fluid.embedding` register their table with the pslib fleet (one sparse table id per
embedding name, its width and accessor checked against earlier uses) and pull its rows with
pslib's `pull_sparse`.

The registration and its checks are Fluid's; the pull needs pslib's runtime, which is not
part of Fluidity, so a layer built inside the block raises ImportError after its arguments
are checked, as in a Paddle built without pslib."""
import contextlib

from .fleet_wrapper import _INSTEAD

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


def _fleet_embedding(input, size, is_sparse=False, is_distributed=False, padding_idx=None,
                     param_attr=None, dtype="float32"):
    """`fluid.layers.embedding` inside fleet_embedding: checked and registered, then pulled
    with pslib (unavailable here)."""
    _prepare_params(input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype)
    raise ImportError(f"embedding '{param_attr.name}' through pslib's pull_sparse: {_INSTEAD}")


def _fleet_embedding_v2(input, size, is_sparse=False, is_distributed=False, padding_idx=None,
                        param_attr=None, dtype="float32"):
    """`fluid.embedding` inside fleet_embedding (see _fleet_embedding)."""
    _prepare_params(input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype)
    raise ImportError(f"embedding '{param_attr.name}' through pslib's pull_sparse_v2: "
                      f"{_INSTEAD}")


class fleet_embedding(contextlib.ContextDecorator):  # noqa: N801 -- Fluid's name
    """`with fleet_embedding(click_name=label.name):` routes fluid.layers.embedding and
    fluid.embedding through pslib for the block, and restores them after."""

    def __init__(self, click_name, scale_sparse_grad=True):
        self.click_name = "" if click_name is None else click_name
        self.scale_sparse_grad = scale_sparse_grad
        self.accessor = "DownpourCtrAccessor"      # Fluid's default; minimize may change it
        self._saved = None

    def __enter__(self):
        import fluidity as fluid
        self._saved = (fluid.layers.embedding, fluid.embedding)
        fluid.layers.embedding = _fleet_embedding
        fluid.embedding = _fleet_embedding_v2
        FLEET_GLOBAL_DICT.update(cur_accessor=self.accessor, click_name=self.click_name,
                                 scale_sparse_grad=self.scale_sparse_grad)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        import fluidity as fluid
        fluid.layers.embedding, fluid.embedding = self._saved
        FLEET_GLOBAL_DICT.update(cur_accessor="", click_name="", scale_sparse_grad=None)
        return False

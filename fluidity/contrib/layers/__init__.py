"""`fluid.contrib.layers`: basic_lstm / basic_gru and their one-step units;
fused_elemwise_activation, fused_embedding_seq_pool; shuffle_batch, partial_concat,
partial_sum; index_sample; tdm_child, tdm_sampler; var_conv_2d, match_matrix_tensor, search_pyramid_hash;
tree_conv."""
from . import batch_ops, fused, indexing, rnn_impl, tdm, text_matching, tree
from .batch_ops import *  # noqa: F401,F403
from .fused import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .rnn_impl import *  # noqa: F401,F403
from .tdm import *  # noqa: F401,F403
from .text_matching import *  # noqa: F401,F403
from .tree import *  # noqa: F401,F403

__all__ = (list(rnn_impl.__all__) + list(fused.__all__) + list(batch_ops.__all__) +
           list(tdm.__all__) + list(text_matching.__all__) + list(tree.__all__) +
           list(indexing.__all__))

"""Every op family registers its ops on import; `registry` finds them (`fluidity ops`)."""
from . import registry
from . import (activation, control_flow, conv, creation, feed_fetch, indexing, io_ops,  # noqa: F401
               logic, lookup, loss, math, memory_ops, metric, nn, norm, optimizer_ops, recurrent,
               reduce, rnn, sequence, shape_ops, tensor, tensor_array)
from .registry import OpDef, all_ops, find, get, has

from . import scatter  # noqa: F401,E402  (Fluid 1.x index ops)
from . import ranking_loss, soft_label  # noqa: F401,E402  (rank/bpr losses; label_smooth, kldiv)
from . import center_loss, vector_norm  # noqa: F401,E402  (center_loss; norm, l1_norm, cos_sim)
from . import model_average, optimizer_variants  # noqa: F401,E402  (adamax, lamb, ...)
from . import layout  # noqa: F401,E402  (Fluid 1.x pads, crops, channel movers)
from . import volume  # noqa: F401,E402  (conv3d, conv3d_transpose, pool3d, unfold)
from . import bilinear_products, sequence_context  # noqa: F401,E402  (fsp, conv_shift, ...; row_conv, ...)
from . import image_geometry, spectral_norm  # noqa: F401,E402  (affine_grid, grid_sampler, ...)
from . import py_func  # noqa: F401,E402  (py_func)
from . import ctc, sequence_erase  # noqa: F401,E402  (warpctc, ctc_align; sequence_erase)
# h6-book: CRF, sampled losses and beam search
from . import beam, crf, sampled  # noqa: F401,E402
from . import reader_ops  # noqa: F401
from . import print_op  # noqa: F401
from . import dist_ops  # noqa: F401,E402  (send, recv, barriers, listen_and_serv)
from . import collective_ops, device  # noqa: F401,E402  (c_allreduce_*, c_comm_init, get_places)
# detection: ROI pooling, box geometry, NMS and proposals, matching, detection losses
from . import box_match, boxes, detection_loss, detection_map, nms, roi  # noqa: F401,E402
from . import anchor_targets, deformable  # noqa: F401,E402  (rpn/retinanet targets, proposal labels; deformable_conv)
from . import mask_targets  # noqa: F401,E402  (generate_mask_labels: Mask R-CNN's mask targets)
from . import lstmp, sample_logits  # noqa: F401,E402  (projected LSTM, sampled softmax)
from . import interp  # noqa: F401,E402  (bilinear/nearest/trilinear/bicubic_interp, Fluid 1.x's resize)
from . import quantize  # noqa: F401,E402  (fake_quantize_*, fake_dequantize_*, dequantize_abs_max/log)
from . import ctr  # noqa: F401,E402  (hash, filter_by_instag, data_norm, cvm)
# Fluid 1.8's fused CPU ops (fusion_gru, fusion_seqpool_concat, fused_elemwise_activation, ...)
from . import fused_dense, fused_elemwise, fused_rnn, fused_sequence  # noqa: F401,E402
# Fluid 1.8's other late ops: minus, squared_l2_distance, modified_huber_loss, partial_*,
# proximal_*, seed, shuffle_batch, precision_recall, ref_by_trainer_id, lookup_table_dequant,
# spp, unpool
from . import (distance, modified_huber, partial,  # noqa: F401,E402
               precision_recall, proximal, quant_lookup, seeded, trainer_ref, pooling_pyramid,
               pyramid_hash, similarity_focus, tdm, text_matching)
from . import positive_negative_pair  # noqa: F401,E402  (the pairwise ranking metric)
from . import tree_conv  # noqa: F401,E402  (tree-based convolution, TBCNN)

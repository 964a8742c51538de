"""Where Fluid 1.8 defines each `fluid.layers` name, so programs that import from the module
path (`from paddle.fluid.layers.nn import reduce_max`, `fluid.layers.tensor.concat`,
`layers.control_flow.While`) run unchanged.

Fluidity groups its layers by what they build (manip, vision, sequence, ...), not as Fluid
laid out its files. `FLUID_MODULES` is Fluid 1.8's layout as data: each module's `__all__`
(read from `python/paddle/fluid/layers/<module>.py` at the 1.8 branch point). `bind`, run
once at the end of `fluidity/layers/__init__.py`, gives each `fluidity.layers.<module>` the
names it lacks, as the very objects `fluidity.layers` exports, and adds them to its `__all__`.
"""
import importlib

FLUID_MODULES = {
    "nn": (
        "fc", "embedding", "linear_chain_crf", "crf_decoding", "cos_sim", "chunk_eval",
        "conv2d", "conv3d", "softmax", "pool2d", "pool3d", "adaptive_pool2d",
        "adaptive_pool3d", "batch_norm", "inplace_abn", "instance_norm", "data_norm",
        "conv2d_transpose", "conv3d_transpose", "reduce_sum", "reduce_mean", "reduce_max",
        "reduce_min", "reduce_prod", "reduce_all", "reduce_any", "dropout", "split",
        "ctc_greedy_decoder", "l2_normalize", "matmul", "topk", "transpose", "im2sequence",
        "row_conv", "multiplex", "layer_norm", "group_norm", "spectral_norm", "smooth_l1",
        "one_hot", "autoincreased_step_counter", "reshape", "squeeze", "unsqueeze",
        "lod_reset", "lod_append", "lrn", "pad", "pad_constant_like", "label_smooth",
        "roi_pool", "roi_align", "dice_loss", "image_resize", "image_resize_short",
        "resize_bilinear", "resize_trilinear", "resize_nearest", "gather", "gather_nd",
        "scatter", "scatter_nd_add", "scatter_nd", "random_crop", "mean_iou", "relu",
        "selu", "log", "crop", "crop_tensor", "elu", "relu6", "pow", "stanh",
        "hard_sigmoid", "swish", "prelu", "brelu", "leaky_relu", "soft_relu", "flatten",
        "stack", "pad2d", "unstack", "unique", "unique_with_counts", "expand", "expand_as",
        "scale", "elementwise_add", "elementwise_div", "elementwise_sub", "elementwise_mul",
        "elementwise_max", "elementwise_min", "elementwise_pow", "elementwise_mod",
        "elementwise_floordiv", "uniform_random_batch_size_like", "gaussian_random",
        "sampling_id", "gaussian_random_batch_size_like", "sum", "slice", "strided_slice",
        "shape", "rank", "size", "logical_and", "logical_or", "logical_xor", "logical_not",
        "clip", "clip_by_norm", "mean", "mul", "maxout", "space_to_depth", "affine_grid",
        "affine_channel", "similarity_focus", "hash", "grid_sampler", "log_loss",
        "add_position_encoding", "bilinear_tensor_product", "merge_selected_rows",
        "get_tensor_from_selected_rows", "shuffle_channel", "temporal_shift", "py_func",
        "psroi_pool", "prroi_pool", "pixel_shuffle", "fsp_matrix", "continuous_value_model",
        "where", "sign", "deformable_conv", "unfold", "deformable_roi_pooling",
        "filter_by_instag", "shard_index", "hard_swish", "gather_tree", "uniform_random",
        "unbind"),
    "tensor": (
        "create_tensor", "create_parameter", "create_global_var", "cast",
        "tensor_array_to_tensor", "concat", "sums", "assign",
        "fill_constant_batch_size_like", "fill_constant", "argmin", "argmax", "argsort",
        "ones", "zeros", "reverse", "has_inf", "has_nan", "isfinite", "range", "linspace",
        "zeros_like", "ones_like", "diag", "eye"),
    "io": (
        "data", "read_file", "double_buffer", "py_reader", "create_py_reader_by_data",
        "load"),
    "control_flow": (
        "While", "Switch", "increment", "array_write", "create_array", "less_than",
        "less_equal", "greater_than", "greater_equal", "equal", "not_equal", "array_read",
        "array_length", "cond", "IfElse", "DynamicRNN", "StaticRNN",
        "reorder_lod_tensor_by_rank", "Print", "is_empty", "case", "switch_case",
        "while_loop"),
    "ops": (
        "sigmoid", "logsigmoid", "exp", "tanh", "atan", "tanh_shrink", "sqrt", "rsqrt",
        "abs", "ceil", "floor", "cos", "acos", "asin", "sin", "round", "reciprocal",
        "square", "softplus", "softsign", "softshrink", "hard_shrink", "cumsum",
        "thresholded_relu", "gelu", "erf"),
    "detection": (
        "prior_box", "density_prior_box", "multi_box_head", "bipartite_match",
        "target_assign", "detection_output", "ssd_loss", "rpn_target_assign",
        "retinanet_target_assign", "sigmoid_focal_loss", "anchor_generator",
        "roi_perspective_transform", "generate_proposal_labels", "generate_proposals",
        "generate_mask_labels", "iou_similarity", "box_coder", "polygon_box_transform",
        "yolov3_loss", "yolo_box", "box_clip", "multiclass_nms", "locality_aware_nms",
        "retinanet_detection_output", "distribute_fpn_proposals", "box_decoder_and_assign",
        "collect_fpn_proposals"),
    "metric_op": ("accuracy", "auc"),
    "sequence_lod": (
        "sequence_conv", "sequence_softmax", "sequence_pool", "sequence_concat",
        "sequence_first_step", "sequence_last_step", "sequence_slice", "sequence_expand",
        "sequence_expand_as", "sequence_pad", "sequence_unpad", "sequence_reshape",
        "sequence_scatter", "sequence_enumerate", "sequence_mask", "sequence_reverse"),
    "loss": (
        "center_loss", "bpr_loss", "cross_entropy", "square_error_cost", "edit_distance",
        "warpctc", "nce", "hsigmoid", "sampled_softmax_with_cross_entropy",
        "softmax_with_cross_entropy", "rank_loss", "margin_rank_loss",
        "sigmoid_cross_entropy_with_logits", "teacher_student_sigmoid_loss", "huber_loss",
        "kldiv_loss", "npair_loss", "mse_loss"),
    "learning_rate_scheduler": (
        "exponential_decay", "natural_exp_decay", "inverse_time_decay", "polynomial_decay",
        "piecewise_decay", "noam_decay", "cosine_decay", "linear_lr_warmup"),
    "distributions": ("Uniform", "Normal", "Categorical", "MultivariateNormalDiag"),
    "rnn": (
        "RNNCell", "GRUCell", "LSTMCell", "Decoder", "BeamSearchDecoder", "rnn",
        "dynamic_decode", "DecodeHelper", "TrainingHelper", "GreedyEmbeddingHelper",
        "SampleEmbeddingHelper", "BasicDecoder", "dynamic_lstm", "dynamic_lstmp",
        "dynamic_gru", "gru_unit", "lstm_unit", "lstm", "beam_search", "beam_search_decode"),
    "device": (),
}


def bind(layers):
    """Give every module of FLUID_MODULES the names Fluid 1.8 defines in it, taken from
    `layers` (the `fluidity.layers` namespace, complete). A module that already defines a
    name keeps its own: it is the same object (tests/layers/test_module_paths.py checks)."""
    for module, names in FLUID_MODULES.items():
        mod = importlib.import_module(f"{__package__}.{module}")
        exported = mod.__all__ = list(getattr(mod, "__all__", ()))
        for name in names:
            if name not in mod.__dict__ and name in layers:
                setattr(mod, name, layers[name])
            if name in mod.__dict__ and name not in exported:
                exported.append(name)

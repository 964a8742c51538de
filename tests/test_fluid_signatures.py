"""Fluid 1.8's argument names (API.spec ArgSpecs) of fluid.layers / optimizer / initializer
/ clip names this package builds: each Fluid signature must be a prefix of ours, so
positional and keyword calls written for Fluid bind the same way."""
import inspect

import pytest

import fluidity as fluid

LAYERS = {
    "zeros": "shape dtype force_cpu", "ones": "shape dtype force_cpu",
    "zeros_like": "x out", "ones_like": "x out", "range": "start end step dtype",
    "linspace": "start stop num dtype", "eye": "num_rows num_columns batch_shape dtype",
    "diag": "diagonal", "reverse": "x axis", "has_inf": "x", "has_nan": "x", "isfinite": "x",
    "uniform_random": "shape dtype min max seed",
    "gaussian_random": "shape mean std seed dtype",
    "uniform_random_batch_size_like":
        "input shape dtype input_dim_idx output_dim_idx min max seed",
    "gaussian_random_batch_size_like":
        "input shape input_dim_idx output_dim_idx mean std seed dtype",
    "sampling_id": "x min max seed dtype",
    "gather_nd": "input index name", "scatter": "input index updates name overwrite",
    "scatter_nd_add": "ref index updates name", "scatter_nd": "index updates shape name",
    "unique": "x dtype", "unique_with_counts": "x dtype",
    "shard_index": "input index_num nshards shard_id ignore_value",
    "expand_as": "x target_tensor name", "strided_slice": "input axes starts ends strides",
    "rank": "input", "size": "input", "reduce_all": "input dim keep_dim name",
    "reduce_any": "input dim keep_dim name",
    "rank_loss": "label left right name", "margin_rank_loss": "label left right margin name",
    "bpr_loss": "input label name", "kldiv_loss": "x target reduction name",
    "teacher_student_sigmoid_loss": "input label soft_max_up_bound soft_max_lower_bound",
    "mse_loss": "input label", "npair_loss": "anchor positive labels l2_reg",
    "warpctc": "input label blank norm_by_times input_length label_length",
    "ctc_greedy_decoder": "input blank input_length padding_value name",
    "edit_distance": "input label normalized ignored_tokens input_length label_length",
    "center_loss": "input label num_classes alpha param_attr update_center",
    "dice_loss": "input label epsilon name",
    "hard_swish": "x threshold scale offset name",
    "fc": "input size num_flatten_dims param_attr bias_attr act name",
    "argsort": "input axis descending name",
    "label_smooth": "label prior_dist epsilon dtype name", "cos_sim": "X Y",
    "l2_normalize": "x axis epsilon name",
    "conv2d_transpose": "input num_filters output_size filter_size padding stride dilation "
                        "groups param_attr bias_attr use_cudnn act name data_format",
    "conv3d": "input num_filters filter_size stride padding dilation groups param_attr "
              "bias_attr use_cudnn act name data_format",
    "pool3d": "input pool_size pool_type pool_stride pool_padding global_pooling use_cudnn "
              "ceil_mode name exclusive data_format",
    "adaptive_pool2d": "input pool_size pool_type require_index name",
    "image_resize": "input out_shape scale name resample actual_shape align_corners "
                    "align_mode data_format",
    "resize_bilinear": "input out_shape scale name actual_shape align_corners align_mode "
                       "data_format",
    "resize_nearest": "input out_shape scale name actual_shape align_corners data_format",
    "image_resize_short": "input out_short_len resample",
    "prelu": "x mode param_attr name",
    "instance_norm": "input epsilon param_attr bias_attr name",
    "group_norm": "input groups epsilon param_attr bias_attr act data_layout name",
    "pad": "x paddings pad_value name", "pad2d": "input paddings mode pad_value data_format name",
    "pad_constant_like": "x y pad_value name", "crop": "x shape offsets name",
    "crop_tensor": "x shape offsets name", "space_to_depth": "x blocksize name",
    "pixel_shuffle": "x upscale_factor", "shuffle_channel": "x group name",
    "temporal_shift": "x seg_num shift_ratio name", "maxout": "x groups name",
    "affine_channel": "x scale bias data_layout name act", "lrn": "input n k alpha beta name",
    "unfold": "x kernel_sizes strides paddings dilations name",
    "multiplex": "inputs index", "bilinear_tensor_product": "x y size act name param_attr "
                                                            "bias_attr",
    "add_position_encoding": "input alpha beta name", "fsp_matrix": "x y",
    "continuous_value_model": "input cvm use_cvm", "mean_iou": "input label num_classes",
    "affine_grid": "theta out_shape name", "random_crop": "x shape seed",
    "tensor_array_to_tensor": "input axis name",
    "case": "pred_fn_pairs default name", "switch_case": "branch_index branch_fns default name",
    "is_empty": "x cond", "autoincreased_step_counter": "counter_name begin step",
    "leaky_relu": "x alpha name", "pow": "x factor name", "stanh": "x scale_a scale_b name",
    "soft_relu": "x threshold name", "hard_shrink": "x threshold",
    "thresholded_relu": "x threshold", "softshrink": "x alpha", "brelu": "x t_min t_max name",
    "elu": "x alpha name", "relu6": "x threshold name", "swish": "x beta name",
    "hard_sigmoid": "x slope offset name", "selu": "x scale alpha name",
    "less_than": "x y force_cpu cond", "sums": "input out",
    "batch_norm": "input act is_test momentum epsilon param_attr bias_attr data_layout "
                  "in_place name moving_mean_name moving_variance_name "
                  "do_model_average_for_mean_and_var fuse_with_relu use_global_stats",
    "exponential_decay": "learning_rate decay_steps decay_rate staircase",
    "piecewise_decay": "boundaries values", "noam_decay": "d_model warmup_steps",
}
OPTIMIZERS = {
    "Adamax": "learning_rate beta1 beta2 epsilon parameter_list regularization grad_clip name",
    "DecayedAdagrad": "learning_rate decay epsilon parameter_list regularization grad_clip "
                      "name",
    "Adadelta": "learning_rate epsilon rho parameter_list regularization grad_clip name",
    "Lamb": "learning_rate lamb_weight_decay beta1 beta2 epsilon parameter_list "
            "regularization grad_clip exclude_from_weight_decay_fn name",
    "LarsMomentum": "learning_rate momentum lars_coeff lars_weight_decay parameter_list "
                    "regularization grad_clip name",
    "Dpsgd": "learning_rate clip batch_size sigma parameter_list",
    "ModelAverage": "average_window_rate min_average_window max_average_window "
                    "regularization name",
    "ExponentialMovingAverage": "decay thres_steps name",
    "RecomputeOptimizer": "optimizer", "LookaheadOptimizer": "inner_optimizer alpha k",
}
METHODS = {
    "minimize": "loss startup_program parameter_list no_grad_set grad_clip",
    "backward": "loss startup_program parameter_list no_grad_set callbacks",
    "apply_gradients": "params_grads", "apply_optimize": "loss startup_program params_grads",
}
OTHERS = {
    (fluid.initializer, "UniformInitializer"): "low high seed diag_num diag_step diag_val",
    (fluid.initializer, "BilinearInitializer"): "",
    (fluid.clip, "GradientClipByValue"): "max min need_clip",
    (fluid.clip, "GradientClipByNorm"): "clip_norm need_clip",
    (fluid.clip, "GradientClipByGlobalNorm"): "clip_norm group_name need_clip",
}


def _params(fn):
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def _check(fn, want):
    want = want.split()
    got = _params(fn)
    assert got[:len(want)] == want, f"Fluid: {want}\nours:  {got}"


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_takes_fluids_arguments(name):
    _check(getattr(fluid.layers, name), LAYERS[name])


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_takes_fluids_arguments(name):
    _check(getattr(fluid.optimizer, name).__init__, OPTIMIZERS[name])
    assert getattr(fluid.optimizer, name + "Optimizer", None) in (
        None, getattr(fluid.optimizer, name))


@pytest.mark.parametrize("method", sorted(METHODS))
def test_optimizer_methods_take_fluids_arguments(method):
    _check(getattr(fluid.optimizer.Optimizer, method), METHODS[method])


@pytest.mark.parametrize("key", sorted(OTHERS, key=lambda k: k[1]), ids=lambda k: k[1])
def test_initializers_and_clips_take_fluids_arguments(key):
    _check(getattr(*key).__init__, OTHERS[key])

"""Which ops run in float16 under automatic mixed precision (Fluid 1.8's lists): white ops
always (their float32 inputs are cast), black ops never (their float16 inputs are cast
back), gray ops as the ops that feed them; an op on no list is black."""
import copy

__all__ = ["AutoMixedPrecisionLists"]

# float16 is fast and safe: the big matrix products
white_list = {"conv2d", "matmul", "mul"}

# float16 is unsafe: reductions, exponentials, losses
black_list = {"exp", "square", "log", "mean", "sum", "cos_sim", "softmax",
              "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits",
              "cross_entropy", "cross_entropy2"}

# the precision of what feeds them
gray_list = {"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
             "elementwise_max", "elementwise_min", "elementwise_pow", "elementwise_mod",
             "elementwise_floordiv", "batch_norm", "tanh", "sigmoid", "lookup_table", "top_k",
             "pool2d", "pool3d", "dropout", "relu", "relu6", "leaky_relu", "soft_relu",
             "flatten2", "stack", "unstack", "uniform_random_batch_size_like",
             "gaussian_random", "gaussian_random_batch_size_like", "slice", "rank", "scale",
             "transpose2", "reshape2", "gather", "fill_constant",
             "get_tensor_from_selected_rows", "sign", "cast"}


class AutoMixedPrecisionLists:
    """The white, black and gray lists, with a user's own: `custom_white_list` ops move to
    the white list, `custom_black_list` ops to the black list (an op on both is a
    ValueError), and ops touching `custom_black_varnames` stay float32."""

    def __init__(self, custom_white_list=None, custom_black_list=None,
                 custom_black_varnames=None):
        self._custom_white_list = custom_white_list
        self._custom_black_list = custom_black_list
        self.white_list = copy.copy(white_list)
        self.black_list = copy.copy(black_list)
        self.gray_list = copy.copy(gray_list)
        self.black_varnames = copy.copy(custom_black_varnames)
        self._update_list()

    def _update_list(self):
        white, black = set(self._custom_white_list or ()), set(self._custom_black_list or ())
        both = white & black
        if both:
            raise ValueError(f"Custom white list overlap custom black list: {sorted(both)}")
        for op in white:
            self.black_list.discard(op)
            self.gray_list.discard(op)
            self.white_list.add(op)
        for op in black:
            self.white_list.discard(op)
            self.gray_list.discard(op)
            self.black_list.add(op)

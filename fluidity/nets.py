"""fluid.nets: composite networks built from fluid.layers (Fluid 1.x signatures)."""
from . import layers
from .core import dtypes
from .framework import check_variable_and_dtype

__all__ = ["simple_img_conv_pool", "sequence_conv_pool", "glu", "scaled_dot_product_attention",
           "img_conv_group"]


def simple_img_conv_pool(input, num_filters, filter_size, pool_size, pool_stride,
                         pool_padding=0, pool_type="max", global_pooling=False, conv_stride=1,
                         conv_padding=0, conv_dilation=1, conv_groups=1, param_attr=None,
                         bias_attr=None, act=None, use_cudnn=True):
    """conv2d (with act) followed by pool2d."""
    conv_out = layers.conv2d(input=input, num_filters=num_filters, filter_size=filter_size,
                             stride=conv_stride, padding=conv_padding, dilation=conv_dilation,
                             groups=conv_groups, param_attr=param_attr, bias_attr=bias_attr,
                             act=act, use_cudnn=use_cudnn)
    return layers.pool2d(input=conv_out, pool_size=pool_size, pool_type=pool_type,
                         pool_stride=pool_stride, pool_padding=pool_padding,
                         global_pooling=global_pooling, use_cudnn=use_cudnn)


def _per_conv(value, n, what):
    """One value per conv layer: a scalar repeated, or a list of exactly n."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"img_conv_group: {what} has {len(value)} entries but "
                             f"conv_num_filter has {n}")
        return list(value)
    return [value] * n


def img_conv_group(input, conv_num_filter, pool_size, conv_padding=1, conv_filter_size=3,
                   conv_act=None, param_attr=None, conv_with_batchnorm=False,
                   conv_batchnorm_drop_rate=0.0, pool_stride=1, pool_type="max",
                   use_cudnn=True):
    """A VGG block: len(conv_num_filter) conv2d layers (each optionally followed by
    batch_norm carrying the activation and dropout), then one pool2d."""
    if not isinstance(conv_num_filter, (list, tuple)) or not conv_num_filter:
        raise TypeError(f"img_conv_group: conv_num_filter must be a non-empty list or tuple "
                        f"of filter counts, got {conv_num_filter!r}")
    n = len(conv_num_filter)
    padding = _per_conv(conv_padding, n, "conv_padding")
    fsize = _per_conv(conv_filter_size, n, "conv_filter_size")
    pattr = _per_conv(param_attr, n, "param_attr")
    with_bn = _per_conv(conv_with_batchnorm, n, "conv_with_batchnorm")
    drop = _per_conv(conv_batchnorm_drop_rate, n, "conv_batchnorm_drop_rate")
    tmp = input
    for i in range(n):
        tmp = layers.conv2d(input=tmp, num_filters=conv_num_filter[i], filter_size=fsize[i],
                            padding=padding[i], param_attr=pattr[i],
                            act=None if with_bn[i] else conv_act, use_cudnn=use_cudnn)
        if with_bn[i]:
            tmp = layers.batch_norm(input=tmp, act=conv_act)
            if abs(drop[i]) > 1e-5:
                tmp = layers.dropout(x=tmp, dropout_prob=drop[i])
    return layers.pool2d(input=tmp, pool_size=pool_size, pool_type=pool_type,
                         pool_stride=pool_stride, use_cudnn=use_cudnn)


def sequence_conv_pool(input, num_filters, filter_size, param_attr=None, act="sigmoid",
                       pool_type="max", bias_attr=None):
    """sequence_conv (with act) followed by sequence_pool."""
    conv_out = layers.sequence_conv(input=input, num_filters=num_filters,
                                    filter_size=filter_size, param_attr=param_attr,
                                    bias_attr=bias_attr, act=act)
    return layers.sequence_pool(input=conv_out, pool_type=pool_type)


def glu(input, dim=-1):
    """Gated linear unit: split `input` in two halves a, b along `dim`; a * sigmoid(b)."""
    a, b = layers.split(input, num_or_sections=2, dim=dim)
    return layers.elementwise_mul(x=a, y=layers.sigmoid(b))


def _check_attention_inputs(queries, keys, values, num_heads):
    for arg, v in (("queries", queries), ("keys", keys), ("values", values)):
        check_variable_and_dtype(v, arg, ["float32", "float64"], "scaled_dot_product_attention")
    if not queries.dtype == keys.dtype == values.dtype:
        raise TypeError("scaled_dot_product_attention: queries, keys and values must be of one "
                        f"dtype, got {dtypes.name(queries.dtype)}, {dtypes.name(keys.dtype)}, "
                        f"{dtypes.name(values.dtype)}")
    if not (len(queries.shape) == len(keys.shape) == len(values.shape) == 3):
        raise ValueError("scaled_dot_product_attention: queries, keys and values must all be "
                         "3-D tensors [batch, length, hidden]")
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"scaled_dot_product_attention: the hidden size of queries "
                         f"({queries.shape[-1]}) and keys ({keys.shape[-1]}) must be the same")
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: keys ({keys.shape[-2]}) and values "
                         f"({values.shape[-2]}) must have the same sequence length")
    for what, v in (("keys", keys), ("values", values)):
        if v.shape[-1] % num_heads:
            raise ValueError(f"scaled_dot_product_attention: the hidden size of {what} "
                             f"({v.shape[-1]}) must be divisible by num_heads ({num_heads})")


def scaled_dot_product_attention(queries, keys, values, num_heads=1, dropout_rate=0.):
    """Multi-head attention softmax(Q K^T / sqrt(d_k)) V over 3-D [batch, length, hidden]
    inputs; with num_heads > 1 Q, K and V first go through their own fc layers."""
    _check_attention_inputs(queries, keys, values, num_heads)
    if num_heads > 1:
        queries, keys_p, values_p = (
            layers.fc(input=x, size=x.shape[-1], num_flatten_dims=2)
            for x in (queries, keys, values))
    else:
        keys_p, values_p = keys, values

    def split_heads(x):
        if num_heads == 1:
            return x
        r = layers.reshape(x=x, shape=[0, 0, num_heads, x.shape[-1] // num_heads])
        return layers.transpose(x=r, perm=[0, 2, 1, 3])

    q, k, v = split_heads(queries), split_heads(keys_p), split_heads(values_p)
    scaled_q = layers.scale(x=q, scale=(keys.shape[-1] // num_heads) ** -0.5)
    product = layers.matmul(x=scaled_q, y=k, transpose_y=True)
    weights = layers.softmax(product)
    if dropout_rate:
        weights = layers.dropout(weights, dropout_prob=dropout_rate, is_test=False)
    ctx = layers.matmul(weights, v)
    if num_heads == 1:
        return ctx
    t = layers.transpose(ctx, perm=[0, 2, 1, 3])
    return layers.reshape(x=t, shape=[0, 0, t.shape[2] * t.shape[3]])

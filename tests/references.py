"""numpy references of ops that tests in several folders compare with."""
import numpy as np


def pads4(p):
    return [p[0], p[0], p[1], p[1]] if len(p) == 2 else list(p)


def conv_ref(x, w, strides=(1, 1), paddings=(0, 0), dilations=(1, 1), groups=1, bias=None):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    t, b, left, right = pads4(paddings)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b), (left, right)))
    oh = (h + t + b - (dilations[0] * (kh - 1) + 1)) // strides[0] + 1
    ow = (wd + left + right - (dilations[1] * (kw - 1) + 1)) // strides[1] + 1
    out = np.zeros((n, m, oh, ow))
    mg = m // groups
    for ni in range(n):
        for mi in range(m):
            g = mi // mg
            for i in range(oh):
                for j in range(ow):
                    hs, ws = i * strides[0], j * strides[1]
                    patch = xp[ni, g * cg:(g + 1) * cg,
                               hs:hs + dilations[0] * (kh - 1) + 1:dilations[0],
                               ws:ws + dilations[1] * (kw - 1) + 1:dilations[1]]
                    out[ni, mi, i, j] = (patch * w[mi]).sum()
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out.astype(x.dtype)


def pool_ref(x, ksize=None, strides=(1, 1), paddings=(0, 0), pooling_type="max", ceil_mode=False,
             exclusive=True, global_pooling=False, adaptive=False):
    n, c, h, w = x.shape
    if global_pooling:
        ksize, paddings = (h, w), (0, 0)
    t, b, left, right = pads4(paddings)

    def size(L, k, s, p0, p1):        # Paddle's C++ int division: truncates toward zero
        return int((L + p0 + p1 - k + (s - 1 if ceil_mode else 0)) / s) + 1
    oh, ow = (ksize if adaptive else
              (size(h, ksize[0], strides[0], t, b), size(w, ksize[1], strides[1], left, right)))
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            if adaptive:
                hs, he = (i * h) // oh, -(-((i + 1) * h) // oh)
                ws, we = (j * w) // ow, -(-((j + 1) * w) // ow)
            else:
                hs, ws = i * strides[0] - t, j * strides[1] - left
                he, we = min(hs + ksize[0], h), min(ws + ksize[1], w)
                hs, ws = max(hs, 0), max(ws, 0)
            win = x[:, :, hs:he, ws:we].astype(np.float64)
            if pooling_type == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                div = (he - hs) * (we - ws) if exclusive or adaptive else ksize[0] * ksize[1]
                out[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return out.astype(x.dtype)


def bn_ref(x, scale, bias, mean, var, eps, axis=1):
    shape = [1] * x.ndim
    shape[axis] = -1
    return ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape)
            + bias.reshape(shape))

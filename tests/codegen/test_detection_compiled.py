"""Detection building blocks compiled (emit/cpu/boxes.py): an SSD-style head (conv feature
maps, multi_box_head's prior_box and conv predictions, box_coder decoding the locations
against the priors, iou_similarity and box_clip of the decoded boxes) runs in inference as
one native segment with the interpreter's results; a grid too large for a literal table
runs its prior_box interpreted."""
import numpy as np

import fluidity as fluid
from fluidity.codegen.lower import Lowering

from op_test import build_op, compiled_ops


def _level(feature, image, min_size, max_size, ratios, classes):
    """One SSD level as multi_box_head builds it, its reshapes to literal sizes: (priors [P,
    4], variances [P, 4], locations [N, P, 4], confidences [N, P, classes])."""
    L = fluid.layers
    box, var = L.prior_box(feature, image, [min_size], [max_size], ratios,
                           [0.1, 0.1, 0.2, 0.2], flip=True, clip=True)
    p = box.shape[0] * box.shape[1] * box.shape[2]
    heads = []
    for width in (4, classes):
        h = L.conv2d(feature, box.shape[2] * width, 1)
        heads.append(L.reshape(L.transpose(h, [0, 2, 3, 1]), [-1, p, width]))
    return L.reshape(box, [p, 4]), L.reshape(var, [p, 4]), heads[0], heads[1]


def _ssd_head():
    main, startup = fluid.Program(), fluid.Program()
    startup.random_seed = 7
    L = fluid.layers
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        image = L.data("image", [3, 32, 32])
        f1 = L.conv2d(image, 8, 3, stride=4, padding=1, act="relu")     # 8 x 8
        f2 = L.conv2d(f1, 8, 3, stride=2, padding=1, act="relu")        # 4 x 4
        levels = [_level(f1, image, 6.0, 14.0, [2.0], 3),
                  _level(f2, image, 14.0, 24.0, [2.0, 3.0], 3)]
        box, var, loc, conf = (L.concat(list(parts), axis=1 if k >= 2 else 0)
                               for k, parts in enumerate(zip(*levels)))
        decoded = L.box_coder(box, var, loc, code_type="decode_center_size")
        scores = L.softmax(conf)
        iou = L.iou_similarity(L.reshape(decoded, [-1, 4]), box)
        im_info = L.data("im_info", [1, 3], append_batch_size=False)   # one image: no LoD
        clipped = L.box_clip(decoded, im_info)
    return main, startup, [decoded, scores, iou, clipped]


def test_an_ssd_head_runs_compiled_in_one_segment_as_interpreted():
    main, startup, fetch = _ssd_head()
    rows = Lowering(main, 0).explain()
    assert {w for _, _, w, _ in rows} == {"segment 0"}, \
        [(t, w, why) for _, t, w, why in rows if w != "segment 0"]
    assert {"prior_box", "box_coder", "iou_similarity", "box_clip"} <= {t for _, t, _, _ in rows}
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    r = np.random.default_rng(3)
    compiled = fluid.CompiledProgram(main).with_native_code()
    for n in (1, 2):
        feed = {"image": r.normal(size=(n, 3, 32, 32)).astype("float32"),
                "im_info": np.array([[24, 28, 1.0]], np.float32)}
        want = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
        got = exe.run(compiled, feed=feed, fetch_list=fetch, scope=scope)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_grid_too_large_for_a_table_runs_prior_box_interpreted():
    main, _, _, _, _ = build_op(
        "prior_box", {"Input": np.zeros((1, 1, 100, 100), np.float32),
                      "Image": np.zeros((1, 1, 300, 300), np.float32)},
        {"min_sizes": [30.0], "aspect_ratios": [2.0], "variances": [0.1, 0.1, 0.2, 0.2]},
        ["Boxes", "Variances"])
    assert "prior_box" not in compiled_ops(main)

"""`fluid.metrics`: metrics accumulated in Python over mini-batches.

A training loop fetches per-batch numbers (an accuracy, chunk counts, predictions) and
feeds them to a metric's `update`; `eval()` gives the value over everything seen since the
last `reset()`:

    acc = fluid.metrics.Accuracy()
    for batch in reader():
        a, = exe.run(main, feed=..., fetch_list=[batch_acc])
        acc.update(value=a, weight=len(batch))
    print(acc.eval())

The metrics and their arithmetic are Fluid 1.x's; they run on numpy values only (nothing
here touches a program). `DetectionMAP` builds detection_map ops in the program.
"""
import copy
import numbers

import numpy as np


__all__ = ["MetricBase", "CompositeMetric", "Precision", "Recall", "Accuracy",
           "ChunkEvaluator", "EditDistance", "DetectionMAP", "Auc"]


def _is_numpy(x):
    return isinstance(x, (np.ndarray, np.generic))


def _is_number_or_matrix(x):
    return isinstance(x, numbers.Number) or _is_numpy(x)


def _must_be_numpy(value, what):
    if not _is_numpy(value):
        raise ValueError(f"The '{what}' must be a numpy ndarray, got {type(value).__name__}")
    return value


def _must_be_number_or_matrix(value, what):
    if not _is_number_or_matrix(value):
        raise ValueError(f"The '{what}' must be a number (int, float) or a numpy ndarray, got "
                         f"{type(value).__name__}")
    return value


class MetricBase:
    """The base of every metric. Its state is its public attributes: `reset()` zeroes
    them (ints to 0, floats to 0.0, arrays to zeros, others to None), `get_config()`
    returns {"name", "states"}. Subclasses implement `update` and `eval`."""

    def __init__(self, name):
        self._name = str(name) if name is not None else self.__class__.__name__

    def __str__(self):
        return self._name

    def _states(self):
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def reset(self):
        for attr, value in self._states().items():
            if isinstance(value, bool):
                setattr(self, attr, False)
            elif isinstance(value, int):
                setattr(self, attr, 0)
            elif isinstance(value, float):
                setattr(self, attr, 0.0)
            elif _is_numpy(value):
                setattr(self, attr, np.zeros_like(value))
            else:
                setattr(self, attr, None)

    def get_config(self):
        return {"name": self._name, "states": copy.deepcopy(self._states())}

    def _subclass_must(self, method):
        raise NotImplementedError(f"{type(self).__name__} must implement {method}()")

    def update(self, preds, labels):
        """Add one batch (implemented by each metric)."""
        self._subclass_must("update")

    def eval(self):
        """The metric over every batch since the last reset (implemented by each metric)."""
        self._subclass_must("eval")


class CompositeMetric(MetricBase):
    """Several metrics updated with the same (preds, labels); `eval()` lists their values."""

    def __init__(self, name=None):
        super().__init__(name)
        self._metrics = []

    def add_metric(self, metric):
        if not isinstance(metric, MetricBase):
            raise ValueError("SubMetric should be inherit from MetricBase.")
        self._metrics.append(metric)

    def update(self, preds, labels):
        for m in self._metrics:
            m.update(preds, labels)

    def eval(self):
        return [m.eval() for m in self._metrics]


def _confusion(preds, labels):
    """(true positives, false positives, false negatives) of binary `preds` (rounded to
    0/1) against `labels`."""
    preds = np.rint(_must_be_numpy(preds, "preds")).astype("int32").reshape(-1)
    labels = np.asarray(_must_be_numpy(labels, "labels")).reshape(-1)
    if preds.shape != labels.shape:
        raise ValueError(f"preds ({preds.size} values) and labels ({labels.size}) differ in "
                         f"length")
    predicted, actual = preds == 1, labels == 1
    return (int(np.sum(predicted & actual)), int(np.sum(predicted & ~actual)),
            int(np.sum(~predicted & actual)))


def _ratio(num, den):
    return float(num) / den if den != 0 else 0.0


class Precision(MetricBase):
    """Binary precision tp / (tp + fp); `preds` are rounded to 0/1."""

    def __init__(self, name=None):
        super().__init__(name)
        self.tp = 0
        self.fp = 0

    def update(self, preds, labels):
        tp, fp, _ = _confusion(preds, labels)
        self.tp += tp
        self.fp += fp

    def eval(self):
        return _ratio(self.tp, self.tp + self.fp)


class Recall(MetricBase):
    """Binary recall tp / (tp + fn); `preds` are rounded to 0/1."""

    def __init__(self, name=None):
        super().__init__(name)
        self.tp = 0
        self.fn = 0

    def update(self, preds, labels):
        tp, _, fn = _confusion(preds, labels)
        self.tp += tp
        self.fn += fn

    def eval(self):
        return _ratio(self.tp, self.tp + self.fn)


class Accuracy(MetricBase):
    """The weighted mean of per-batch accuracies: `update(value, weight)` with the batch's
    accuracy (e.g. `layers.accuracy`'s output) and its size."""

    def __init__(self, name=None):
        super().__init__(name)
        self.value = 0.0
        self.weight = 0.0

    def update(self, value, weight):
        _must_be_number_or_matrix(value, "value")
        if not isinstance(weight, numbers.Number) and not (_is_numpy(weight)
                                                           and np.size(weight) == 1):
            raise ValueError(f"The 'weight' must be a number (int, float), got "
                             f"{type(weight).__name__}")
        if _is_numpy(value) and np.size(value) == 1:    # a fetched [1] or [] accuracy
            value = float(np.asarray(value).reshape(-1)[0])
        if _is_numpy(weight):
            weight = float(np.asarray(weight).reshape(-1)[0])
        self.value += value * weight
        self.weight += weight

    def eval(self):
        if self.weight == 0:
            raise ValueError("There is no data in Accuracy Metrics. Please check "
                             "layers.accuracy output has added to Accuracy.")
        return self.value / self.weight


class ChunkEvaluator(MetricBase):
    """Precision, recall and F1 of chunks (named entities) from the counts
    `layers.chunk_eval` returns per batch."""

    def __init__(self, name=None):
        super().__init__(name)
        self.num_infer_chunks = 0
        self.num_label_chunks = 0
        self.num_correct_chunks = 0

    def update(self, num_infer_chunks, num_label_chunks, num_correct_chunks):
        for v, what in ((num_infer_chunks, "num_infer_chunks"),
                        (num_label_chunks, "num_label_chunks"),
                        (num_correct_chunks, "num_correct_chunks")):
            _must_be_number_or_matrix(v, what)
        self.num_infer_chunks += num_infer_chunks
        self.num_label_chunks += num_label_chunks
        self.num_correct_chunks += num_correct_chunks

    def eval(self):
        correct = float(np.sum(self.num_correct_chunks))
        infer = float(np.sum(self.num_infer_chunks))
        label = float(np.sum(self.num_label_chunks))
        precision, recall = _ratio(correct, infer), _ratio(correct, label)
        f1 = 2 * precision * recall / (precision + recall) if correct else 0.0
        return precision, recall, f1


class EditDistance(MetricBase):
    """Mean edit distance and instance error rate from `layers.edit_distance`'s per-batch
    distances and sequence count."""

    def __init__(self, name=None):
        super().__init__(name)
        self.total_distance = 0.0
        self.seq_num = 0
        self.instance_error = 0

    def update(self, distances, seq_num):
        distances = _must_be_numpy(distances, "distances")
        _must_be_number_or_matrix(seq_num, "seq_num")
        seq_num = int(np.sum(seq_num))
        self.seq_num += seq_num
        self.instance_error += seq_num - int(np.sum(distances == 0))
        self.total_distance += float(np.sum(distances))

    def eval(self):
        if self.seq_num == 0:
            raise ValueError("There is no data in EditDistance Metric. Please check "
                             "layers.edit_distance output has been added to EditDistance.")
        return self.total_distance / self.seq_num, self.instance_error / float(self.seq_num)


class Auc(MetricBase):
    """Area under the ROC curve over `num_thresholds` buckets of the positive-class
    probability (`preds[:, 1]`, as Fluid's)."""

    def __init__(self, name, curve="ROC", num_thresholds=4095):
        super().__init__(name=name)
        if curve != "ROC":
            raise ValueError(f"Auc: only the ROC curve is computed, got {curve!r}")
        self._curve = curve
        self._num_thresholds = int(num_thresholds)
        # per-bucket counts as Python lists, as Fluid 1.8's (programs extend and append to
        # them, e.g. to build the auc op's StatPos layout)
        self._stat_pos = [0] * (self._num_thresholds + 1)
        self._stat_neg = [0] * (self._num_thresholds + 1)

    def reset(self):
        super().reset()
        self._stat_pos = [0] * (self._num_thresholds + 1)
        self._stat_neg = [0] * (self._num_thresholds + 1)

    def update(self, preds, labels):
        preds = _must_be_numpy(preds, "preds")
        labels = np.asarray(_must_be_numpy(labels, "labels")).reshape(-1)
        if preds.ndim != 2 or preds.shape[1] < 2 or preds.shape[0] != labels.size:
            raise ValueError(f"Auc.update: preds must be [N, 2] class probabilities for N "
                             f"labels, got {list(preds.shape)} for {labels.size} labels")
        bins = (preds[:, 1] * self._num_thresholds).astype(np.int64)
        if bins.size and (bins.min() < 0 or bins.max() > self._num_thresholds):
            raise ValueError("Auc.update: probabilities must lie in [0, 1]")
        pos = labels.astype(bool)
        n = self._num_thresholds + 1
        self._stat_pos = [a + int(b) for a, b in zip(self._stat_pos,
                                                      np.bincount(bins[pos], minlength=n))]
        self._stat_neg = [a + int(b) for a, b in zip(self._stat_neg,
                                                      np.bincount(bins[~pos], minlength=n))]

    @staticmethod
    def trapezoid_area(x1, x2, y1, y2):
        return abs(x1 - x2) * (y1 + y2) / 2.0

    def eval(self):
        tot_pos = tot_neg = 0.0
        auc = 0.0
        for idx in range(self._num_thresholds, -1, -1):
            prev_pos, prev_neg = tot_pos, tot_neg
            tot_pos += float(self._stat_pos[idx])
            tot_neg += float(self._stat_neg[idx])
            auc += self.trapezoid_area(tot_neg, prev_neg, tot_pos, prev_pos)
        return auc / tot_pos / tot_neg if tot_pos > 0.0 and tot_neg > 0.0 else 0.0


class DetectionMAP:
    """Detection mAP of a program's detections (detection_output's rows) against the ground
    truth: `get_map_var()` gives (this batch's mAP, the mAP accumulated since the last
    `reset`) as Variables to fetch. Builds two detection_map ops (fluidity/ops/
    detection_map.py) in the current program, the second over persistable state."""

    def __init__(self, input, gt_label, gt_box, gt_difficult=None, class_num=None,
                 background_label=0, overlap_threshold=0.5, evaluate_difficult=True,
                 ap_version="integral"):
        from . import layers, unique_name
        from .initializer import ConstantInitializer
        from .layer_helper import LayerHelper
        from .layers.detection import detection_map
        self.helper = LayerHelper("map_eval")
        gt_label = layers.cast(gt_label, gt_box.dtype)
        if gt_difficult is not None:
            gt_difficult = layers.cast(gt_difficult, gt_box.dtype)
            label = layers.concat([gt_label, gt_difficult, gt_box], axis=1)
        else:
            label = layers.concat([gt_label, gt_box], axis=1)
        # the images' ground truth: concat gives no LoD here, so take gt_box's
        label = layers.lod_reset(label, y=gt_box)
        kw = {"overlap_threshold": overlap_threshold, "evaluate_difficult": evaluate_difficult,
              "ap_version": ap_version}
        self.cur_map = detection_map(input, label, class_num, background_label, **kw)

        def state(suffix, dtype, shape=None):
            name = "_".join([unique_name.generate(self.helper.name), suffix])
            return self.helper.create_global_variable(persistable=True, dtype=dtype,
                                                      shape=shape, name=name)
        states = [state("accum_pos_count", "int32"), state("accum_true_pos", "float32"),
                  state("accum_false_pos", "float32")]
        self.has_state = state("has_state", "int32", [1])
        self.helper.set_variable_initializer(self.has_state, ConstantInitializer(0))
        self.accum_map = detection_map(input, label, class_num, background_label,
                                       has_state=self.has_state, input_states=states,
                                       out_states=states, **kw)
        layers.fill_constant(shape=[1], value=1, dtype="int32", out=self.has_state)

    def get_map_var(self):
        """(mAP of the current mini-batch, mAP accumulated over the batches since reset)."""
        return self.cur_map, self.accum_map

    def reset(self, executor, reset_program=None):
        """Forget the accumulated state (at the start of a pass): runs `reset_program` (a new
        Program if None) setting the has-state flag to 0."""
        from . import layers
        from .framework import Program, program_guard
        if reset_program is None:
            reset_program = Program()
        with program_guard(reset_program):
            var = reset_program.current_block().create_var(
                name=self.has_state.name, shape=self.has_state.shape,
                dtype=self.has_state.dtype, persistable=True)
            layers.fill_constant(shape=var.shape, value=0, dtype=var.dtype, out=var)
        executor.run(reset_program)

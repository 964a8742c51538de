"""sample_logits: the sampler under Fluid's sampled_softmax_with_cross_entropy (Jean et al.
2015), as Paddle 1.8 defines it, and its gradient.

For logits [N, K] and true labels [N, NT] it draws num_samples classes from the log-uniform
(Zipfian) distribution P(k) = log((k + 2) / (k + 1)) / log(K + 1), one draw shared by the
batch, and gives for the NT + num_samples classes of each row

    SampledLogits = Logits[i, Samples[i, j]] - log(Q[i, j])

where Q is each class's probability of being in the sample (1 - (1 - P)^tries for unique
sampling, P * num_samples with replacement). Samples start with the row's true labels; a
sampled class equal to a true label is pushed to -1e20 (remove_accidental_hits). With
use_customized_samples the caller gives Samples and Probabilities (the inputs
CustomizedSamples / CustomizedProbabilities) and nothing is drawn.
"""
import numpy as np

from ..core.tensor import LoDTensor
from ..errors import ExecutionError
from .registry import In, OpDef, Out

APPROX_INF = 1e20


def log_uniform_probability(k, num_classes):
    return np.log((k + 2.0) / (k + 1.0)) / np.log(num_classes + 1.0)


def draw_log_uniform(rng, num_classes, num_samples, unique):
    """(classes [num_samples], draws made): log-uniform draws in [0, num_classes), distinct
    ones when `unique` (drawing until there are num_samples)."""
    log_range = np.log(num_classes + 1.0)
    if not unique:
        v = np.exp(rng.uniform(0, 1, num_samples) * log_range).astype(np.int64) - 1
        return v % num_classes, num_samples
    if num_samples > num_classes:
        raise ExecutionError(f"sample_logits: cannot draw {num_samples} distinct classes of "
                             f"{num_classes}")
    seen, out, tries = set(), [], 0
    while len(out) < num_samples:
        batch = np.exp(rng.uniform(0, 1, 2 * num_samples) * log_range).astype(np.int64) - 1
        for v in batch % num_classes:
            tries += 1
            if v not in seen:
                seen.add(int(v))
                out.append(int(v))
                if len(out) == num_samples:
                    break
    return np.asarray(out, np.int64), tries


def _tolerable(v):
    return np.where(v == np.inf, APPROX_INF, np.where(v == -np.inf, -APPROX_INF, v))


class SampleLogits(OpDef):
    type = "sample_logits"
    inputs = (In("Logits"), In("Labels", no_grad=True),
              In("CustomizedSamples", dispensable=True, no_grad=True),
              In("CustomizedProbabilities", dispensable=True, no_grad=True))
    outputs = (Out("Samples", intermediate=True), Out("Probabilities", intermediate=True),
               Out("LogitsDim", intermediate=True), Out("LabelsDim", intermediate=True),
               Out("SampledLogits", intermediate=True), Out("SampledLabels"))
    attrs = {"use_customized_samples": False, "uniq": True, "remove_accidental_hits": True,
             "num_samples": 1, "seed": 0}
    share_lod = None
    doc = ("SampledLogits [N, NT + S] = Logits at the true labels and S log-uniform sampled "
           "classes, less the log of each class's sampling probability; SampledLabels [N, NT] "
           "= 0..NT-1 (the true classes come first).")

    @staticmethod
    def infer_shape(ctx):
        lg, lb = ctx.input_shape("Logits"), ctx.input_shape("Labels")
        if len(lg) != 2 or len(lb) != 2:
            ctx.fail(f"Logits must be [N, K] and Labels [N, NT], got {lg} and {lb}")
        width = lb[1] + ctx.attr("num_samples") if lb[1] > 0 else -1
        dt = ctx.input_dtype("Logits")
        ctx.set_output("Samples", [lg[0], width], "int64", 0)
        ctx.set_output("Probabilities", [lg[0], width], dt, 0)
        ctx.set_output("SampledLogits", [lg[0], width], dt, 0)
        ctx.set_output("SampledLabels", [lg[0], lb[1]], "int64", 0)
        if ctx.has_output("LogitsDim"):
            ctx.set_output("LogitsDim", lg, dt, 0)
        if ctx.has_output("LabelsDim"):
            ctx.set_output("LabelsDim", lb, "int64", 0)

    @classmethod
    def prepare(cls, attrs, outputs):
        s, seed = attrs["num_samples"], attrs["seed"]
        # seed 0: a fresh stream; otherwise the same samples every run (Paddle's sampler is
        # re-seeded on each run)
        stream = np.random.default_rng() if seed == 0 else None

        def kernel(logits, labels, custom_samples, custom_probs):
            n, k = logits.shape
            lab = np.asarray(labels).astype(np.int64).reshape(n, -1)
            nt = lab.shape[1]
            if lab.size and (lab.min() < 0 or lab.max() >= k):
                raise ExecutionError(f"sample_logits: a label is outside [0, {k})")
            if attrs["use_customized_samples"]:
                if custom_samples is None or custom_probs is None:
                    raise ExecutionError("sample_logits: use_customized_samples needs "
                                         "CustomizedSamples and CustomizedProbabilities")
                samples = np.asarray(custom_samples).astype(np.int64)
                probs = np.asarray(custom_probs, logits.dtype)
                if samples.shape != (n, nt + s) or probs.shape != samples.shape:
                    raise ExecutionError(
                        f"sample_logits: CustomizedSamples {list(samples.shape)} and "
                        f"CustomizedProbabilities {list(probs.shape)} must be [N, NT + "
                        f"num_samples] = [{n}, {nt + s}]")
                if samples.size and (samples.min() < 0 or samples.max() >= k):
                    raise ExecutionError(f"sample_logits: a customized sample is outside "
                                         f"[0, {k})")
            else:
                rng = stream if stream is not None else np.random.default_rng(seed)
                drawn, tries = draw_log_uniform(rng, k, s, attrs["uniq"])
                samples = np.concatenate([lab, np.tile(drawn, (n, 1))], axis=1)
                p = log_uniform_probability(samples.astype(np.float64), k)
                q = p * s if tries == s else -np.expm1(tries * np.log1p(-p))
                probs = q.astype(logits.dtype)
            sampled = np.take_along_axis(logits, samples, axis=1).astype(logits.dtype)
            if attrs["remove_accidental_hits"] and s:
                hit = (samples[:, nt:, None] == samples[:, None, :nt]).any(axis=2)
                sampled[:, nt:] = np.where(hit, sampled[:, nt:] - APPROX_INF, sampled[:, nt:])
            with np.errstate(divide="ignore"):
                sampled = _tolerable(sampled - _tolerable(np.log(probs)))
            labels_out = np.tile(np.arange(nt, dtype=np.int64), (n, 1))
            return (samples, probs, np.broadcast_to(np.zeros((), logits.dtype), logits.shape),
                    np.broadcast_to(np.zeros((), np.int64), lab.shape),
                    sampled.astype(logits.dtype), labels_out)
        return kernel

    @staticmethod
    def grad(g):
        g.op("sample_logits_grad",
             {"LogitsDim": g.output("LogitsDim"), "LabelsDim": g.output("LabelsDim"),
              "Samples": g.output("Samples"), "SampledLogits@GRAD": g.output_grad("SampledLogits")},
             {"Logits@GRAD": g.input_grad("Logits")}, g.attrs())


class SampleLogitsGrad(OpDef):
    type = "sample_logits_grad"
    inputs = (In("LogitsDim"), In("LabelsDim"), In("Samples"), In("SampledLogits@GRAD"))
    outputs = (Out("Logits@GRAD", dispensable=True),)
    attrs = SampleLogits.attrs
    share_lod = None

    @staticmethod
    def infer_shape(ctx):
        if ctx.has_output("Logits@GRAD"):
            ctx.set_output("Logits@GRAD", ctx.input_shape("LogitsDim"),
                           ctx.input_dtype("SampledLogits@GRAD"), 0)

    @staticmethod
    def kernel(logits_dim, labels_dim, samples, dsampled):
        """The sampled logits' gradients added back at their classes (a class sampled twice
        gets both)."""
        n, k = logits_dim.shape
        d = np.zeros((n, k), dsampled.dtype)
        np.add.at(d, (np.arange(n)[:, None], np.asarray(samples, np.int64)), dsampled)
        return d

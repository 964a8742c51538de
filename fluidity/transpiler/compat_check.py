"""Can Fluidity run this program? The check a loaded program (a Paddle `.pdmodel`/`__model__`,
or one of ours) goes through before anything runs it.

Every op of every block must be registered, and each of its attributes and (non-empty)
input/output slots must be in its OpDef's schema; and where the program's `op_version_map`
records a version of an op type the program uses that is newer than the `OpDef.version`
Fluidity implements, the op's meaning may have changed since (Paddle's op version
checkpoints: new inputs, attributes, changed formulas), so the program is refused.

All problems are gathered first and reported in ONE `UnsupportedProgramError` that names
every unsupported op type (with how many ops and which blocks), every unknown attribute and
slot per op type, and every too-new op version — so one look tells what a model needs.

Versions are compared only for op types the program uses: Paddle writes the version of
every op it has ever versioned into each saved program (68 entries in 2.6), used or not.

The attribute rule. An attribute of an op is accepted when it is
1. declared by the op's OpDef (its schema: what the kernel reads, with Paddle's defaults;
   an attribute a newer Paddle added that changes the result, such as Paddle 3.x's
   `ceil_mode` of max_pool2d_with_index or `values` of assign_value, is implemented there
   and the op's `version` raised to match), or
2. one every op carries (`registry.COMMON_ATTRS`: op_role, op_role_var, op_namescope,
   op_callstack, op_device, with_quant_attr), or
3. a kernel-selection hint (`KERNEL_HINTS`: use_mkldnn, use_cudnn, ...), which never changes
   an op's result, or
4. one of Paddle's per-op "extra" attributes its reference CPU kernels ignore
   (`PADDLE_EXTRA_ATTRS`, from `paddle.base.core.get_op_extra_attrs` of Paddle 2.6.2 and
   3.3.1: oneDNN scales and fusions, parameter-server routing such as lookup_table's
   `epmap`/`table_class`, training-only seeds).
Any other attribute may change what the op computes, so the program is refused with an
error naming the op type and the attribute; a Paddle version that adds one is supported by
adding it to the op (1), or to PADDLE_EXTRA_ATTRS (4) where Paddle's kernel ignores it.
"""
from ..errors import UnknownOpError
from ..ops import registry
from ..proto import framework_pb2 as pb

__all__ = ["UnsupportedProgramError", "KERNEL_HINTS", "PADDLE_EXTRA_ATTRS", "find_unsupported",
           "check_program"]

# Paddle "extra" attributes that only choose a kernel implementation (oneDNN, cuDNN, int8
# quantization passes) and never the result; Paddle 2.x clips most of them on save, some
# survive (e.g. cast's use_mkldnn).
KERNEL_HINTS = frozenset({"use_mkldnn", "use_cudnn", "mkldnn_data_type", "use_quantizer",
                          "use_onednn", "onednn_data_type", "workspace_size_MB",
                          "exhaustive_search"})

# Paddle's other "extra" attributes (`paddle.base.core.get_op_extra_attrs(op)` in Paddle 2.6.2
# and 3.3.1, less KERNEL_HINTS and the attributes Fluidity's ops declare), for the op types Fluidity has or Paddle models commonly emit: what
# Paddle itself strips from inference programs (`_remove_training_info(clip_extra=True)`)
# because its reference CPU kernels do not read them (oneDNN int8 scales and fusions, cuDNN
# tuning, training-only seeds, parameter-server routing). Fluid 1.x programs (`__model__`)
# still carry them all; they are accepted and ignored.
_SCALES = ("Scale_out", "Scale_x", "Scale_y")
_CONV = ("force_fp32_output", "is_test", "use_addto")
_FUSE = ("fuse_activation", "fuse_alpha", "fuse_beta", "fuse_relu")
_PS = ("epmap", "height_sections", "is_distributed", "is_sparse", "remote_prefetch", "slot",
       "table_names", "trainer_id")
PADDLE_EXTRA_ATTRS = {
    "batch_norm": ("fuse_with_relu",),
    "conditional_block": ("skip_eager_deletion_vars",),
    "conv2d": _CONV,
    "conv2d_transpose": ("force_fp32_output", "is_test") + _FUSE,
    "depthwise_conv2d": _CONV + _FUSE + ("Scale_in", "Scale_in_eltwise", "Scale_out",
                                         "Scale_weights", "fuse_relu_before_depthwise_conv",
                                         "fuse_residual_connection"),
    "dropout": ("fix_seed", "seed"),
    "elementwise_add": _SCALES, "elementwise_sub": _SCALES, "elementwise_mul": _SCALES,
    "elementwise_div": _SCALES, "elementwise_max": _SCALES, "elementwise_pow": _SCALES,
    "elementwise_mod": _SCALES, "elementwise_floordiv": _SCALES,
    "elementwise_min": _SCALES + ("x_data_format", "y_data_format"),
    "fc": ("Scale_in", "Scale_weights", "Scale_out", "force_fp32_output") + _FUSE[:3]
    + ("fused_output_scale", "fused_reshape2_shape"),
    "layer_norm": ("is_test",),
    # Paddle 3.x writes lookup_table's parameter-server routing and admission attributes
    # with their neutral values (entry/table_class 'none')
    "lookup_table": _PS + ("entry", "grad_inplace", "table_class"),
    "lookup_table_v2": _PS,
    "matmul": _SCALES + ("force_fp32_output",),
    "matmul_v2": ("force_fp32_output",),
    "pool2d": ("is_test",),
    "prelu": ("is_test",),
    "sequence_softmax": ("data_format",),
    "softmax": ("data_format", "is_test"),
    "transpose2": ("data_format",),
    "while": ("skip_eager_deletion_vars",),
}
# their gradient ops carry the same ones
PADDLE_EXTRA_ATTRS.update({t + "_grad": a for t, a in list(PADDLE_EXTRA_ATTRS.items())
                           if t != "while"})


class UnsupportedProgramError(UnknownOpError):
    """A program holds ops, attributes, slots or op versions the registry does not support.

    `unknown_ops`: {op type: [block indices of its ops]}; `unknown_attrs` and
    `unknown_slots`: {op type: sorted names}; `newer_versions`: {op type: (program's
    version, Fluidity's)}."""

    def __init__(self, message, unknown_ops=None, unknown_attrs=None, unknown_slots=None,
                 newer_versions=None):
        super().__init__(message)
        self.unknown_ops = unknown_ops or {}
        self.unknown_attrs = unknown_attrs or {}
        self.unknown_slots = unknown_slots or {}
        self.newer_versions = newer_versions or {}


def _desc(program):
    return program if isinstance(program, pb.ProgramDesc) else program.desc


def find_unsupported(program):
    """(unknown_ops, unknown_attrs, unknown_slots, newer_versions) of a Program or
    ProgramDesc, as described on UnsupportedProgramError; all empty when Fluidity can run it."""
    desc = _desc(program)
    unknown_ops, unknown_attrs, unknown_slots, newer = {}, {}, {}, {}
    used = set()
    for bd in desc.blocks:
        for od in bd.ops:
            t = od.type
            used.add(t)
            opdef = registry.find(t)
            if opdef is None:
                blocks = unknown_ops.setdefault(t, [])
                blocks.append(bd.idx)
                continue
            extra = PADDLE_EXTRA_ATTRS.get(t, ())
            bad = {a.name for a in od.attrs
                   if not opdef.declares(a.name) and a.name not in KERNEL_HINTS and a.name not in extra}
            if bad:
                unknown_attrs.setdefault(t, set()).update(bad)
            slots = [f"input {v.parameter}" for v in od.inputs
                     if v.arguments and opdef.slot(v.parameter) is None]
            slots += [f"output {v.parameter}" for v in od.outputs
                      if v.arguments and opdef.slot(v.parameter, inputs=False) is None]
            if slots:
                unknown_slots.setdefault(t, set()).update(slots)
    for pair in desc.op_version_map.pair:
        opdef = registry.find(pair.op_name)
        if pair.op_name in used and opdef is not None \
                and pair.op_version.version > opdef.version:
            newer[pair.op_name] = (pair.op_version.version, opdef.version)
    return (unknown_ops, {k: sorted(v) for k, v in unknown_attrs.items()},
            {k: sorted(v) for k, v in unknown_slots.items()}, newer)


def _blocks(idxs):
    ids = sorted(set(idxs))
    n = len(idxs)
    return (f"{n} op{'s' if n > 1 else ''} in block{'s' if len(ids) > 1 else ''} "
            f"{', '.join(map(str, ids))}")


def check_program(program, what="program"):
    """Raise UnsupportedProgramError listing everything in `program` (a Program or
    ProgramDesc) that Fluidity cannot run; `what` starts the message (e.g. the file)."""
    unknown_ops, unknown_attrs, unknown_slots, newer = find_unsupported(program)
    if not (unknown_ops or unknown_attrs or unknown_slots or newer):
        return
    parts = []
    if unknown_ops:
        parts.append(f"{len(unknown_ops)} unsupported op type{'s' if len(unknown_ops) > 1 else ''}: "
                     + "; ".join(f"'{t}' ({_blocks(b)})" for t, b in sorted(unknown_ops.items())))
    if unknown_attrs:
        parts.append("unknown attributes: " + "; ".join(
            f"{t}: {', '.join(a)}" for t, a in sorted(unknown_attrs.items())))
    if unknown_slots:
        parts.append("unknown slots: " + "; ".join(
            f"{t}: {', '.join(s)}" for t, s in sorted(unknown_slots.items())))
    if newer:
        parts.append("op versions newer than Fluidity's: " + "; ".join(
            f"{t} is version {p} in the program, Fluidity implements {f}"
            for t, (p, f) in sorted(newer.items())))
    raise UnsupportedProgramError(
        f"{what} cannot run in Fluidity: " + ". ".join(parts)
        + ". (`fluidity ops` lists the supported ops and their attributes)",
        unknown_ops, unknown_attrs, unknown_slots, newer)

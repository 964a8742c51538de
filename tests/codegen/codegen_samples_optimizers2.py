"""Samples of the update ops of emit/cpu/optimizer_more.py (proximal_gd, proximal_adagrad,
adamw, dpsgd without noise): test_emitters.py runs each as an optimizer appends it (Param
and accumulators updated in place) and compares the compiled bits with the kernel's."""
from codegen_samples import adam_extra, update

SAMPLES = {
    "proximal_gd": update((), {"l1": 0.05, "l2": 0.2}),
    "proximal_adagrad": update(("Moment",), {"l1": 0.1, "l2": 0.01}),
    "adamw": update(("Moment1", "Moment2"), {"coeff": 0.02, "with_decay": True,
                                             "lr_ratio": 0.7}, extra=adam_extra),
    "dpsgd": update((), {"sigma": 0.0, "clip": 0.5, "batch_size": 8.0}),
}
EXTRA = {
    "proximal_gd l2 only": ("proximal_gd", update((), {"l2": 0.3})),
    "proximal_adagrad no regularization": ("proximal_adagrad", update(("Moment",))),
    "adamw without decay, global beta pows": ("adamw", update(
        ("Moment1", "Moment2"), {"use_global_beta_pow": True}, extra=adam_extra)),
    "dpsgd within clip": ("dpsgd", update((), {"sigma": 0.0, "clip": 100.0})),
}


"""Update ops whose compiled form refuses some cases, so that they run interpreted: dpsgd
with noise (numpy's default_rng, which no compiled draw repeats), adamw with a SelectedRows
Grad."""
from codegen_samples import adam_extra, update
from op_test import compiled_ops
from test_emitters import _update_program


def test_dpsgd_with_noise_runs_interpreted():
    main, _ = _update_program("dpsgd", update(())()[0], {"sigma": 1.0})
    assert "dpsgd" not in compiled_ops(main)


def test_dpsgd_without_noise_compiles():
    main, _ = _update_program("dpsgd", update(())()[0], {"sigma": 0.0})
    assert "dpsgd" in compiled_ops(main)


def test_adamw_compiles_dense():
    ins = update(("Moment1", "Moment2"), extra=adam_extra)()[0]
    main, _ = _update_program("adamw", ins, {"with_decay": True})
    assert "adamw" in compiled_ops(main)

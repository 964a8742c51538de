"""scripts/fuzz.py's generated-code target in `make test`: a few seeded cases (each compiles
C++), none failing - interpreter and compiled run agree, the canary is never made - reaching
both the compiled and the refusing paths. The full sweep: `scripts/fuzz.py --targets
codegen` (docs/reliability.md)."""
import importlib.util
import os

from paths import ROOT

_spec = importlib.util.spec_from_file_location("fuzz", os.path.join(ROOT, "scripts", "fuzz.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


def test_a_short_codegen_run_finds_nothing(tmp_path):
    res, worker = fuzz.fuzz("codegen", 10, 3, 120.0, str(tmp_path / "out"), progress=False)
    worker.close()
    assert res["failures"] == [], res
    assert sum(res["outcomes"].values()) == 10
    assert "ok" in res["outcomes"] and any(k.startswith("documented:") for k in
                                           res["outcomes"]), res
    assert not (tmp_path / "out" / "CANARY").exists()
    assert "codegen" not in fuzz.TARGETS      # too slow for the default set

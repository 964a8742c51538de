"""scripts/fuzz.py in `make test`: a few thousand cases over every loader and parser, fixed
seed, no raw exception, hang or crash; and the harness catches each kind of failure."""
import importlib.util
import json
import os

from tests.paths import ROOT

_spec = importlib.util.spec_from_file_location("fuzz", os.path.join(ROOT, "scripts", "fuzz.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


def test_every_target_survives_a_short_run(tmp_path):
    summary = tmp_path / "summary.json"
    rc = fuzz.main(["--cases", "400", "--seed", "0", "--out", str(tmp_path / "out"),
                    "--json", str(summary)])
    results = json.loads(summary.read_text())
    assert [r["target"] for r in results] == fuzz.TARGETS
    for r in results:
        assert r["failures"] == [], r
        assert sum(r["outcomes"].values()) == 400
        kinds = set(r["outcomes"])   # the inputs reach both the happy and the error paths
        assert "ok" in kinds and any(k.startswith("documented:") for k in kinds), r
    assert rc == 0


def test_the_harness_catches_raw_errors_hangs_and_crashes(tmp_path):
    out = tmp_path / "out"
    res, worker = fuzz.fuzz("_selftest", 6, 0, 1.0, str(out), progress=False)
    worker.close()
    assert res["outcomes"] == {"ok": 2, "raw": 1, "crash": 1, "documented:FormatError": 1,
                               "hang": 1}
    kinds = sorted((f["kind"], f["class"]) for f in res["failures"])
    assert kinds == [("crash", None), ("hang", None), ("raw", "KeyError")]
    crash = next(f for f in res["failures"] if f["kind"] == "crash")
    assert "signal 11" in crash["message"]
    with open(crash["input"], "rb") as f:
        assert f.read() == b"crash"      # the input is saved beside what happened
    assert json.load(open(crash["input"][:-4] + ".json"))["kind"] == "crash"

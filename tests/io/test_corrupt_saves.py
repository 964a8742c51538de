"""scripts/corrupt_saves.py in small: with the manifest no corrupted parameter file loads
silently, and none ends in a raw exception (docs/reliability.md has the 1,200-case runs)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*extra):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "corrupt_saves.py"),
                        "--trials", "60", "--seed", "3", *extra],
                       capture_output=True, text=True, timeout=300)
    counts = dict((k, int(v)) for k, v in re.findall(r"(refused|same|silent|raw) (\d+)",
                                                      r.stdout))
    return r, counts


def test_no_corrupted_file_loads_silently_with_the_manifest():
    r, counts = _run()
    assert r.returncode == 0, r.stderr[-2000:]
    assert counts["silent"] == 0 and counts["raw"] == 0, r.stdout
    assert counts["refused"] + counts["same"] == 60


def test_without_the_manifest_the_record_checks_still_raise_no_raw_error():
    r, counts = _run("--no-manifest")
    assert r.returncode == 0, r.stderr[-2000:]
    assert counts["raw"] == 0 and sum(counts.values()) == 60, r.stdout
    assert counts["refused"] > 0

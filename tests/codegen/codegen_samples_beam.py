"""Samples of is_empty's compiled form, compiled vs the numpy kernel by test_emitters.py (a
tensor with elements and one without); beam_search and beam_search_decode take 2-level LoD
values and tensor arrays, so they are checked in whole programs:
tests/codegen/test_beam_compiled.py."""
import numpy as np

from codegen_samples import f32

SAMPLES = {
    "is_empty": lambda: ({"X": f32(2, 3)}, {}, None),
}
EXTRA = {
    "is_empty of no rows": ("is_empty", lambda: ({"X": np.zeros((0, 3), np.float32)}, {},
                                                 None)),
}
ELSEWHERE = {"beam_search", "beam_search_decode"}   # tests/codegen/test_beam_compiled.py

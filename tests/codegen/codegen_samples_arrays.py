"""Samples of split's compiled form (the seq2seq example's GRU gates), compiled vs the numpy
kernel by test_emitters.py, its gradient (concat) through the kernel's; the tensor-array
and rank-table ops take values only a program makes (arrays, rank tables), so they are
checked in whole programs: tests/codegen/test_arrays_compiled.py."""
from codegen_samples import f32

SAMPLES = {
    "split": lambda: ({"X": f32(3, 6)}, {"axis": 1, "num": 3}, ["X"], {"Out": 3}),
}
EXTRA = {
    "split sections with -1 over the rows": ("split", lambda: (
        {"X": f32(5, 2, 3)}, {"axis": 0, "sections": [2, -1, 1]}, ["X"], {"Out": 3})),
}
ELSEWHERE = {   # tests/codegen/test_arrays_compiled.py
    "write_to_array", "read_from_array", "lod_array_length", "lod_rank_table",
    "max_sequence_len", "lod_tensor_to_array", "array_to_lod_tensor", "shrink_rnn_memory",
    "reorder_lod_tensor_by_rank"}

"""The C target's emitters (plain C99 over runtime/c_rt.h): a demonstration that a target is
a folder of emitters plus a registry entry (codegen/targets.py). It compiles the elementwise
table's rows whose functions C's runtime has, mul and matmul_v2 as plain loops, scale, mean
and softmax."""

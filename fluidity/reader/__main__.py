"""`python -m fluidity.reader` (Fluid's `python -m paddle.fluid.reader`): importing the
readers is all that running the module does, as in Fluid, where reader is a module with no
main; it checks that the package imports cleanly."""

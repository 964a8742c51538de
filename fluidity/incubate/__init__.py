"""Fluid's `fluid.incubate` namespace: `data_generator` (raw data to MultiSlot lines, a
Dataset's pipe_command) and `fleet` (parameter-server and collective distributed training)."""

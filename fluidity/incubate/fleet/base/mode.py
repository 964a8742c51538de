"""The kinds of fleet (Fluid's `fleet.base.mode.Mode`)."""
__all__ = ["Mode"]


class Mode:
    TRANSPILER = 1
    PSLIB = 2
    COLLECTIVE = 3

"""Fluid's `fluid.incubate` namespace: the parameter-server `fleet` API (incubate/fleet/)."""

"""Readers: feeding programs from Python (DataLoader, PyReader) and the reader layout of a
program (reader/program.py)."""
from .dataloader import DataLoader, PyReader  # noqa: F401

"""Readers: `paddle.reader`'s decorators (fluidity.reader.shuffle, ...), feeding programs
from Python (DataLoader, PyReader) and the reader layout of a program (reader/program.py)."""
from . import creator, decorator  # noqa: F401
from .decorator import *  # noqa: F401,F403
from .dataloader import (DataLoader, GeneratorLoader, PyReader,  # noqa: F401
                         keep_data_loader_order)
from .loader_base import DataLoaderBase  # noqa: F401

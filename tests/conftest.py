"""tests/ mirrors the package (tests/ops for fluidity/ops, ...). The helpers shared by test
modules in several folders (op_test, paths) live here, on sys.path."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

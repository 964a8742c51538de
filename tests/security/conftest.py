"""tests/security runs the hostile corpus (hostile.py) over the op samples of tests/codegen:
both folders on sys.path."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for d in (HERE, os.path.join(os.path.dirname(HERE), "codegen")):
    if d not in sys.path:
        sys.path.insert(0, d)

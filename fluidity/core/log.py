"""The switch for the library's logging: FLUIDITY_LOG_LEVEL.

Every module logs to the `fluidity` logger (or a child of it). Python shows only warnings
of a library that its program has not configured, so by default a user sees Fluidity's
warnings and nothing else. `FLUIDITY_LOG_LEVEL=INFO` (or DEBUG, WARNING, ERROR, CRITICAL,
or a number) sets the logger's level and, unless the program has given the logger handlers
of its own, prints its records on stderr:

    FLUIDITY_LOG_LEVEL=INFO python train.py     # which workers ran, progress, builds
    FLUIDITY_LOG_LEVEL=ERROR python train.py    # warnings silenced too

A program that configures logging itself (logging.basicConfig, its own handlers) keeps
control: the variable then sets only the level. `configure()` does the same from Python.
"""
import logging
import os
import sys

ENV = "FLUIDITY_LOG_LEVEL"
FORMAT = "%(asctime)s fluidity %(levelname)s: %(message)s"
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def parse_level(text):
    """A logging level from a name (any case) or a number; ValueError naming the choices."""
    t = str(text).strip()
    if t.upper() in _LEVELS:
        return getattr(logging, t.upper())
    if t.lstrip("-").isdigit():
        return int(t)
    raise ValueError(f"{ENV}={text!r}: expected one of {', '.join(_LEVELS)} or a number")


def configure(level):
    """Set the `fluidity` logger's level; give it a stderr handler when it has none."""
    logger = logging.getLogger("fluidity")
    logger.setLevel(parse_level(level) if isinstance(level, str) else int(level))
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT, "%H:%M:%S"))
        logger.addHandler(handler)
    return logger


def configure_from_env(environ=os.environ):
    """Apply FLUIDITY_LOG_LEVEL when it is set (at `import fluidity`). A bad value is
    reported once on stderr and otherwise ignored: a typo must not stop a training job."""
    value = environ.get(ENV, "").strip()
    if not value:
        return None
    try:
        return configure(value)
    except ValueError as e:
        print(f"fluidity: warning: {e}; logging left as it is", file=sys.stderr)
        return None

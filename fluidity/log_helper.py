"""Fluid's `fluid.log_helper.get_logger`: a named logger writing to stderr, as Fluid's own
modules and their users' scripts (the CTR readers of Fluid 1.x) make them."""
import logging

__all__ = ["get_logger"]


def get_logger(name, level, fmt=None):
    """The logger `name` at `level`, with one stream handler (formatted by `fmt` when
    given); it does not propagate to the root logger, so a message is printed once. Asking
    twice for the same name adds no second handler."""
    logger = logging.getLogger(name)
    logger.setLevel(level)
    if not any(getattr(h, "_fluid_log_helper", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler._fluid_log_helper = True
        if fmt:
            handler.setFormatter(logging.Formatter(fmt=fmt))
        logger.addHandler(handler)
    logger.propagate = False
    return logger

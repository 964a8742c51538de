"""The one way any stage of the code generator says an op has no compiled form."""


class NotCompilable(Exception):
    """An op (as the program uses it) has no compiled form; the message says why. The
    segmenter catches it, rolls the op back and leaves it to the interpreter."""

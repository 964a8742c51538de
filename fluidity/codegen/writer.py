"""Lines of generated C at an indentation (the renderers write through one)."""
from contextlib import contextmanager


class Writer:
    """`line(text)` writes at the current depth; `block(head)` writes `head`, indents what
    is written inside, then closes it with "}"; `braced(lines)` writes lines whose own braces
    say the depth (control flow: a line ending in "{" opens, one starting with "}" closes)."""

    def __init__(self, depth=0, unit="  "):
        self.depth, self.unit, self.lines = depth, unit, []

    def line(self, text):
        self.lines.append(self.unit * self.depth + text if text else "")

    def extend(self, texts):
        for t in texts:
            self.line(t)

    @contextmanager
    def block(self, head, tail="}"):
        self.line(head)
        self.depth += 1
        try:
            yield self
        finally:
            self.depth -= 1
            self.line(tail)

    def braced(self, texts):
        for t in texts:
            self.depth -= t.startswith("}")
            self.line(t)
            self.depth += t.endswith("{")

    def text(self):
        return "\n".join(self.lines)

"""A size in generated code: a literal the desc knows, or an expression over dims read at run
time (`in0_d0`, the rows of a fed batch; `in2_nlod`, the count of an input's LoD offsets).

Emitters compute sizes with `*`, `+`, `-`, `//` and `%` on Dims and ints; literals fold, so
a program whose shapes the desc knows compiles to constant trip counts. A Dim renders as C
text (`str`, f-strings), knows the run-time symbols it reads (`symbols`: they become the
parameters of the op's function, with no scanning of the generated text), and renders
overflow-checked (`checked`) where it sizes memory (runtime/sizes.h). Paddle's broadcast rule
and the size arithmetic (`ops.common.align_for_broadcast`, `prod`) are written once, for ints
and Dims alike: a Dim compares equal to the int or text of its literal value.
"""
import re

from .refusal import NotCompilable

_IDENT = re.compile(r"[A-Za-z_]\w*\Z")


class Dim:
    """An immutable size expression: `op` is "lit", "sym", "call" or a C operator; `args`
    its operands (Dims; for "lit" the int, for "sym" the name, for "call" the function name
    first)."""
    __slots__ = ("op", "args", "value", "text", "symbols")

    def __init__(self, op, args, value, text, symbols):
        self.op, self.args, self.value, self.text, self.symbols = op, args, value, text, symbols

    # -- making Dims ----------------------------------------------------------------------
    @classmethod
    def lit(cls, n):
        n = int(n)
        return cls("lit", (n,), n, str(n), frozenset())

    @classmethod
    def sym(cls, name):
        """A dim bound at run time to the C name `name`."""
        if not _IDENT.match(name):
            raise ValueError(f"{name!r} is not a C name")
        return cls("sym", (name,), None, name, frozenset([name]))

    @classmethod
    def call(cls, fn, *args):
        """A size a runtime function computes from others (`fl::arange_len(...)`)."""
        args = tuple(dim(a) for a in args)
        text = f"{fn}({', '.join(a.text for a in args)})"
        return cls("call", (fn,) + args, None, text,
                   frozenset().union(*(a.symbols for a in args)))

    # -- arithmetic -----------------------------------------------------------------------
    def _binary(self, op, other, fold):
        b = dim(other)
        if self.value is not None and b.value is not None and fold is not None:
            r = fold(self.value, b.value)
            if r is not None:
                return Dim.lit(r)
        return Dim(op, (self, b), None, f"({_atom(self)} {op} {_atom(b)})",
                   self.symbols | b.symbols)

    def __mul__(self, other):
        b = dim(other)
        for x, y in ((self, b), (b, self)):
            if x.value == 1:
                return y
            if x.value == 0:
                return Dim.lit(0)
        return self._binary("*", b, _fold_mul)

    def __add__(self, other):
        b = dim(other)
        if b.value == 0:
            return self
        if self.value == 0:
            return b
        return self._binary("+", b, lambda x, y: x + y)

    def __sub__(self, other):
        b = dim(other)
        return self if b.value == 0 else self._binary("-", b, lambda x, y: x - y)

    def __floordiv__(self, other):
        """C's integer division (sizes are not negative: it is Python's there)."""
        b = dim(other)
        if b.value == 1:
            return self
        return self._binary("/", b, lambda x, y: x // y if x >= 0 and y > 0 else None)

    def __mod__(self, other):
        return self._binary("%", dim(other), lambda x, y: x % y if x >= 0 and y > 0 else None)

    def __rmul__(self, other):
        return dim(other) * self

    def __radd__(self, other):
        return dim(other) + self

    def __rsub__(self, other):
        return dim(other) - self

    def __rfloordiv__(self, other):
        return dim(other) // self

    # -- reading ------------------------------------------------------------------------
    @property
    def is_literal(self):
        return self.value is not None

    def __int__(self):
        if self.value is None:
            raise TypeError(f"dim {self.text} is known only at run time")
        return self.value

    __index__ = __int__

    def __eq__(self, other):
        if isinstance(other, Dim):
            return self.text == other.text
        if isinstance(other, bool):
            return NotImplemented
        if isinstance(other, int):
            return self.value == other
        if isinstance(other, str):
            return self.text == other
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self):
        return hash(self.text)

    def __str__(self):
        return self.text

    def __format__(self, spec):
        return format(self.text, spec)

    def __repr__(self):
        return self.text

    def checked(self, ok):
        """C text computing this size with every product and sum overflow-checked
        (runtime/sizes.h): an overflow (or a negative factor) clears the int `ok`."""
        if self.op in ("lit", "sym"):
            return self.text
        if self.op in ("*", "+"):
            fn = "fl_mul_checked" if self.op == "*" else "fl_add_checked"
            a, b = self.args
            return f"{fn}({a.checked(ok)}, {b.checked(ok)}, &{ok})"
        if self.op == "call":
            return f"{self.args[0]}({', '.join(a.checked(ok) for a in self.args[1:])})"
        a, b = self.args
        return f"({a.checked(ok)} {self.op} {b.checked(ok)})"


# the largest size a folded literal may have: a byte count of it still fits an int64
MAX_LITERAL = (1 << 62) - 1


def _fold_mul(x, y):
    """x * y of two literals; a product that does not fit is refused (NotCompilable): the
    generated code never holds a literal C would wrap, and the op runs interpreted, which
    says what is too large."""
    v = x * y
    if abs(v) > MAX_LITERAL:
        raise NotCompilable(f"a size of {x} x {y} does not fit an int64")
    return v


def _atom(d):
    """`d` as an operand: a literal, a name or a call as is, anything else parenthesized
    (already: binary Dims render parenthesized)."""
    return d.text


def dim(x):
    """`x` as a Dim: a Dim as is, an int or a decimal integer text as a literal, a C name as
    a symbol. Any other text is refused: a size is built with Dim arithmetic, so that its
    symbols are known."""
    if isinstance(x, Dim):
        return x
    if isinstance(x, bool):
        raise TypeError(f"{x!r} is not a size")
    if isinstance(x, int) or hasattr(x, "__index__") and not isinstance(x, str):
        return Dim.lit(int(x))
    if isinstance(x, str):
        s = x.strip()
        if s.lstrip("-").isdigit():
            return Dim.lit(int(s))
        if _IDENT.match(s):
            return Dim.sym(s)
    raise TypeError(f"{x!r} is not a size: build dims with Dim arithmetic")


def dims(xs):
    return [dim(x) for x in xs]


def is_lit(d):
    """Whether `d` (a Dim, int or text) is a literal."""
    if isinstance(d, Dim):
        return d.value is not None
    return isinstance(d, int) or (isinstance(d, str) and d.strip().lstrip("-").isdigit())


def symbols(*ds):
    """The run-time symbols of dims `ds` (Dims, ints, texts of literals or names)."""
    out = set()
    for d in ds:
        if d is not None:
            out |= dim(d).symbols
    return out


def bounded(d, bounds):
    """`d` with each run-time symbol of `bounds` ({name: Dim}, dims that change while the
    segment runs, such as a loop pass's rows) replaced by its bound: the size to reserve.
    Only sums, products and divisions by a fixed dim keep a bound a bound; any other use of
    such a symbol is NotCompilable."""
    d = dim(d)
    if not d.symbols & bounds.keys():
        return d
    if d.op == "sym":
        return bounds[d.args[0]]
    if d.op in ("*", "+"):
        a, b = d.args
        return bounded(a, bounds) * bounded(b, bounds) if d.op == "*" else \
            bounded(a, bounds) + bounded(b, bounds)
    if d.op in ("/", "-") and not d.args[1].symbols & bounds.keys():
        a, b = d.args
        return bounded(a, bounds) // b if d.op == "/" else bounded(a, bounds) - b
    raise NotCompilable(f"size {d} depends on a loop pass's rows in a way that has no bound")

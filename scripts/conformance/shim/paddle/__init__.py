"""`paddle` for the conformance run: Paddle 1.8's tests import `paddle.fluid`, `paddle.reader`,
`paddle.batch`, `paddle.compat` and `paddle.dataset`; here they are Fluidity's modules and
synthetic data sets of the same shapes (nothing can be downloaded). This is the mechanical
change the run makes, in one place instead of in every file's import lines."""
import importlib
import importlib.abc
import importlib.util
import sys

import fluidity

# prefix of a Paddle module name -> where it lives here (longest match first)
ALIASES = (
    ("paddle.fluid.tests.unittests.", ""),      # the test directory is on sys.path
    ("paddle.fluid", "fluidity"),
    ("paddle.reader", "fluidity.reader"),
    ("paddle.version", "fluidity.version"),     # the version Fluid reads (require_version)
)


def target_of(fullname):
    for prefix, to in ALIASES:
        if fullname == prefix.rstrip(".") or fullname.startswith(prefix):
            rest = fullname[len(prefix.rstrip(".")):]
            if not to:
                return rest.lstrip(".")
            return to + rest
    return None


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        to = target_of(fullname)
        if to is None:
            return None
        target = importlib.util.find_spec(to)
        if target is None:
            return None
        return importlib.util.spec_from_loader(
            fullname, self, is_package=target.submodule_search_locations is not None)

    def create_module(self, spec):
        return importlib.import_module(target_of(spec.name))

    def exec_module(self, module):
        pass

    def get_code(self, fullname):
        """The code of the module a Paddle name stands for (`python -m paddle.fluid.X`)."""
        to = target_of(fullname)
        return importlib.util.find_spec(to).loader.get_code(to)


sys.meta_path.insert(0, _Alias())

# Every Fluidity module already imported is registered under its Paddle name now, as Paddle's
# are by its package's own imports: importing one through its Paddle name later must find it
# in sys.modules, or the import system rebinds the parent's attribute to the module
# (`from paddle.fluid.layers.rnn import LSTMCell` would make `fluid.layers.rnn` the module,
# where Fluid 1.8 keeps the function there).
import fluidity.version  # noqa: E402,F401
for _name, _mod in list(sys.modules.items()):
    if _name == "fluidity.version":
        sys.modules.setdefault("paddle.version", _mod)
    if _name == "fluidity" or _name.startswith("fluidity."):
        sys.modules.setdefault("paddle.fluid" + _name[len("fluidity"):], _mod)
    if _name == "fluidity.reader" or _name.startswith("fluidity.reader."):
        sys.modules.setdefault("paddle.reader" + _name[len("fluidity.reader"):], _mod)

fluid = importlib.import_module("paddle.fluid")
reader = importlib.import_module("paddle.reader")
batch = fluidity.batch
from . import check_import_scipy, compat, dataset  # noqa: E402,F401
version = sys.modules["paddle.version"]

__version__ = "1.8.0"

# Paddle 1.8's tests were written against numpy 1.16-1.18; the numpy here is 2.x, which removed
# names those tests call. They are put back as the aliases numpy 1.x had (only where missing),
# so a test fails for what Fluidity does, not for its numpy.
import numpy as _np  # noqa: E402

for _old, _new in (("product", "prod"), ("cumproduct", "cumprod"), ("alltrue", "all"),
                   ("sometrue", "any"), ("float_", "float64"), ("complex_", "complex128"),
                   ("NaN", "nan"), ("Inf", "inf"), ("row_stack", "vstack")):
    if not hasattr(_np, _old):
        setattr(_np, _old, getattr(_np, _new))
for _old, _builtin in (("bool", bool), ("int", int), ("float", float), ("object", object),
                       ("long", int), ("unicode", str), ("str", str), ("complex", complex)):
    if _old not in _np.__dict__:
        setattr(_np, _old, _builtin)
if not hasattr(_np, "asscalar"):
    _np.asscalar = lambda a: a.item()

# Likewise Python 3.10 removed the collections ABC aliases (collections.Sequence ...), which
# Paddle 1.8's gradient_checker.py and some tests use: put back as Python 3.9 had them.
import collections as _collections  # noqa: E402
import collections.abc as _abc  # noqa: E402

for _old in ("Sequence", "Mapping", "MutableMapping", "Iterable", "Callable", "Set",
             "MutableSequence", "Hashable", "Sized", "Container", "Iterator"):
    if not hasattr(_collections, _old):
        setattr(_collections, _old, getattr(_abc, _old))

# and Python 3.11 made random.sample refuse a set, which 3.10 still took (as a tuple of it)
import random as _random  # noqa: E402

if not getattr(_random.sample, "takes_sets", False):
    _sample = _random.sample

    def _sample_of_sets(population, k, **kw):
        if isinstance(population, (set, frozenset)):
            population = tuple(population)
        return _sample(population, k, **kw)
    _sample_of_sets.takes_sets = True
    _random.sample = _sample_of_sets

if "newshape" not in __import__("inspect").signature(_np.reshape).parameters:
    # numpy 2.4 removed np.reshape's `newshape=` keyword (numpy 1.x's name for `shape=`)
    _reshape = _np.reshape
    _np.reshape = lambda a, *args, newshape=None, **kw: (
        _reshape(a, newshape, *args, **kw) if newshape is not None else _reshape(a, *args, **kw))

#!/usr/bin/env python
"""How much of Fluid 1.x's public API `import fluidity as fluid` gives, name by name.

    python scripts/api_coverage.py             # per module: total, ok, declined, args, missing
    python scripts/api_coverage.py --missing   # and every name not (yet) there, with why

The names and their argument names come from `scripts/fluid_api_1x.txt` (derived from
Paddle's API.spec; its header says how). Each name is resolved in fluidity with
`paddle.fluid` -> `fluidity`, `paddle.reader` -> `fluidity.reader`, `paddle.batch` ->
`fluidity.batch`, and classified:

  ok        it resolves and accepts every Fluid argument name: the same names in the same
            order for the positional ones (a trailing extra argument must have a default);
            Fluid's *varargs / **kwargs need the same in fluidity
  declined  it resolves but raises NotImplementedError by design (a function or
            constructor whose body is that raise, or one marked by
            `fluidity.errors.declined`); docs/api.md says why for each
  args      it resolves, but its arguments differ from Fluid's (the reason is listed)
  missing   it does not resolve

Excluded from every count (EXCLUDED below says which): fluid.dygraph, fluid.contrib,
fluid.incubate and the dygraph-only methods of static-graph classes. The detection layers
are counted like the rest.
"""
import argparse
import ast
import importlib
import inspect
import os
import re
import sys
import textwrap
from collections import OrderedDict, namedtuple

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "fluid_api_1x.txt")

# Fluid module prefix -> fluidity module prefix (longest first)
MODULE_MAP = [("paddle.fluid", "fluidity"), ("paddle.reader", "fluidity.reader"),
              ("paddle", "fluidity")]

EXCLUDED_PREFIXES = ("paddle.fluid.dygraph.", "paddle.fluid.contrib.", "paddle.fluid.incubate.",
                     "paddle.fluid.dygraph_grad_clip.")
# methods of static-graph classes that exist only for dygraph mode in Fluid 1.x
DYGRAPH_ONLY_METHODS = {
    "paddle.fluid.Variable": {"backward", "clear_gradient", "detach", "gradient", "numpy",
                              "set_value"},
    "paddle.fluid.optimizer": {"set_dict", "state_dict"},   # of every optimizer class
}
# names left out of the counts (none at present: the detection layers, once excluded, are
# counted since they were built; those not built are declined, with why)
EXCLUDED_NAMES = set()


Entry = namedtuple("Entry", "name module kind args varargs varkw")
# kind: "function" (a function or method) | "class" (args = its __init__'s) | "class?"
# (a class whose constructor the spec does not give)

_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?P<cls>\[class\])?(?:\((?P<args>.*)\))?$")


def parse(text):
    """Entries of a data file's text (see its header for the format)."""
    entries, module = [], None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            module = line[1:]
            continue
        m = _LINE.match(line)
        if m is None or module is None:
            raise ValueError(f"line {lineno}: cannot read {raw!r}")
        args, varargs, varkw = [], None, None
        for a in (m.group("args") or "").split(","):
            a = a.strip()
            if a.startswith("**"):
                varkw = a[2:]
            elif a.startswith("*"):
                varargs = a[1:]
            elif a:
                args.append(a)
        kind = "function"
        if m.group("cls"):
            kind = "class" if m.group("args") is not None else "class?"
        entries.append(Entry(f"{module}.{m.group('name')}", module, kind, args, varargs, varkw))
    return entries


def load(path=DATA):
    with open(path) as f:
        return parse(f.read())


def excluded(entry):
    """Why `entry` is out of scope, or None."""
    name = entry.name
    if name.startswith(EXCLUDED_PREFIXES) or name + "." in EXCLUDED_PREFIXES:
        return "dygraph/contrib/incubate"
    if name in EXCLUDED_NAMES or name.rsplit(".", 1)[0] in EXCLUDED_NAMES:
        return "excluded by name"
    owner, _, method = name.rpartition(".")
    for prefix, methods in DYGRAPH_ONLY_METHODS.items():
        if (owner == prefix or owner.startswith(prefix + ".")) and method in methods and \
                owner != entry.module:
            return "dygraph-only method"
    return None


def fluidity_name(name):
    for fluid, ours in MODULE_MAP:
        if name == fluid or name.startswith(fluid + "."):
            return ours + name[len(fluid):]
    return name


_MISSING = object()


def resolve(dotted):
    """The object a dotted name names (modules imported as needed), or _MISSING."""
    parts = dotted.split(".")
    obj = None
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        except Exception:  # noqa: BLE001 -- a broken module is a missing name here
            return _MISSING
        rest = parts[i:]
        break
    else:
        return _MISSING
    for p in rest:
        try:
            obj = getattr(obj, p)
        except Exception:  # noqa: BLE001 -- a property that raises: not usable as named
            return _MISSING
    return obj


def _raises_not_implemented(fn):
    """True when `fn`'s body (after its docstring) is a `raise NotImplementedError(...)`."""
    fn = inspect.unwrap(fn)
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return False
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if not body or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    exc = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def is_declined(obj):
    """Does calling `obj` raise NotImplementedError by design?"""
    if getattr(obj, "__fluidity_declined__", None):
        return True
    if inspect.isclass(obj):
        init = obj.__dict__.get("__init__") or getattr(obj, "__init__", None)
        new = obj.__dict__.get("__new__")
        return (init is not None and _raises_not_implemented(init)) or \
            (new is not None and _raises_not_implemented(new))
    if callable(obj):
        return _raises_not_implemented(obj)
    return False


def _signature(obj, entry):
    """(positional params, keyword-only params, has *args, has **kwargs) of `obj` as a
    caller sees it (self/cls dropped), or None when Python cannot tell."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if entry.kind == "function" and params and params[0].name in ("self", "cls") and \
            inspect.isfunction(obj) and "." in entry.name[len(entry.module) + 1:]:
        params = params[1:]   # a method looked up on its class
    P = inspect.Parameter
    pos = [p for p in params if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    kwonly = [p for p in params if p.kind == P.KEYWORD_ONLY]
    return (pos, kwonly, any(p.kind == P.VAR_POSITIONAL for p in params),
            any(p.kind == P.VAR_KEYWORD for p in params))


def check_args(obj, entry):
    """None when `obj` accepts `entry`'s arguments as Fluid does, else the difference."""
    if entry.kind == "class?":
        return None
    sig = _signature(obj, entry)
    if sig is None:
        return None            # a builtin without a signature: nothing to compare
    pos, kwonly, has_var, has_kw = sig
    for i, want in enumerate(entry.args):
        if i < len(pos):
            got = pos[i].name
            if got != want and not re.fullmatch(r"arg\d+", want):
                return f"argument {i + 1} is '{got}', Fluid's is '{want}'"
        elif has_var and has_kw:
            break              # a pass-through (*args, **kwargs) accepts the rest
        else:
            return f"no argument '{want}' (position {i + 1})"
    for p in pos[len(entry.args):]:
        if p.default is inspect.Parameter.empty:
            return f"extra argument '{p.name}' has no default"
    for p in kwonly:
        if p.default is inspect.Parameter.empty:
            return f"keyword-only argument '{p.name}' has no default"
    if entry.varargs and not has_var:
        return f"takes no *{entry.varargs}"
    if entry.varkw and not has_kw:
        return f"takes no **{entry.varkw}"
    return None


def classify(entry, resolver=resolve):
    """(status, detail): status is 'excluded', 'ok', 'declined', 'args' or 'missing'."""
    why = excluded(entry)
    if why:
        return "excluded", why
    obj = resolver(fluidity_name(entry.name))
    if obj is _MISSING:
        return "missing", "not in fluidity"
    if is_declined(obj):
        return "declined", ""
    diff = check_args(obj, entry)
    if diff:
        return "args", diff
    return "ok", ""


STATUSES = ("ok", "declined", "args", "missing")


def coverage(entries, resolver=resolve):
    """{fluid module: {"total": n, "ok": n, ..., "names": {status: [(name, detail)]}}},
    excluded entries left out of every count."""
    table = OrderedDict()
    for e in entries:
        status, detail = classify(e, resolver)
        if status == "excluded":
            continue
        row = table.setdefault(e.module, {"total": 0, **{s: 0 for s in STATUSES},
                                          "names": {s: [] for s in STATUSES}})
        row["total"] += 1
        row[status] += 1
        row["names"][status].append((e.name, detail))
    return table


def totals(table):
    out = {"total": 0, **{s: 0 for s in STATUSES}}
    for row in table.values():
        for k in out:
            out[k] += row[k]
    return out


def format_table(table):
    head = f"{'module':32} {'total':>6} {'ok':>6} {'declined':>9} {'args':>6} {'missing':>8}"
    lines = [head, "-" * len(head)]
    for mod, row in sorted(table.items()):
        lines.append(f"{mod:32} {row['total']:6} {row['ok']:6} {row['declined']:9} "
                     f"{row['args']:6} {row['missing']:8}")
    t = totals(table)
    lines.append("-" * len(head))
    lines.append(f"{'all':32} {t['total']:6} {t['ok']:6} {t['declined']:9} {t['args']:6} "
                 f"{t['missing']:8}")
    return "\n".join(lines)


def format_names(table, statuses=("args", "missing")):
    lines = []
    for mod, row in sorted(table.items()):
        names = [(s, n, d) for s in statuses for n, d in row["names"][s]]
        if not names:
            continue
        lines.append(f"\n{mod}:")
        for s, n, d in names:
            lines.append(f"  {s:8} {n[len(mod) + 1:]}" + (f"  ({d})" if d else ""))
    return "\n".join(lines)


def require_fluidity():
    """Import fluidity first, so that a Python without its dependencies (protobuf, numpy)
    fails here, naming what is missing, instead of counting every name as missing."""
    try:
        importlib.import_module("fluidity")
    except ImportError as e:
        raise SystemExit(f"api_coverage: cannot import fluidity with {sys.executable}: {e}. "
                         f"Run it with the project's environment (.venv/bin/python "
                         f"scripts/api_coverage.py) or pip install -e .") from None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--missing", action="store_true",
                    help="list every name that is missing or takes other arguments")
    ap.add_argument("--declined", action="store_true", help="list the declined names")
    ap.add_argument("--data", default=DATA, help="the name list (default: %(default)s)")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.dirname(HERE))
    require_fluidity()
    table = coverage(load(args.data))
    print(format_table(table))
    if args.missing:
        print(format_names(table))
    if args.declined:
        print(format_names(table, ("declined",)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The code generator's targets, one registry entry each: the dialect its source is
rendered in (render.py) and what its segments may do. A target's emitters are the folder
emit/<name>/; adding a target is that folder plus an entry here."""
from .render import CPP, CUDA


class Target:
    """`name` as `Lowering(..., target=name)` takes it; `title` as messages say it;
    `dialect` the renderer's; `creates_persistables`: a segment may create a persistable it
    writes first (the CUDA plan allocates it on the device: a startup program's
    fill_constant)."""

    def __init__(self, name, title, dialect, creates_persistables=False):
        self.name, self.title, self.dialect = name, title, dialect
        self.creates_persistables = creates_persistables


TARGETS = {t.name: t for t in (
    Target("cpu", "C++", CPP),
    Target("cuda", "CUDA", CUDA, creates_persistables=True),
)}


def target(name):
    """The Target called `name`; ValueError naming the targets there are."""
    try:
        return TARGETS[name]
    except KeyError:
        raise ValueError(f"code generator target must be one of {sorted(TARGETS)}, got "
                         f"{name!r}") from None

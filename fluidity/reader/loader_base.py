"""`DataLoaderBase` (Fluid 1.8's `fluid.reader.DataLoaderBase`): what every data loader is.

A loader is iterable (`for data in loader():` or `for data in loader:`), and each item is
what `Executor.run(feed=...)` takes: a list with one {name: LoDTensor} per place (or, with
return_list, a list of values). Subclasses implement `__iter__` and/or `__next__`; the
generator-fed loaders (`DataLoader.from_generator`, `PyReader`) and the Dataset loader
(`DataLoader.from_dataset`) are DataLoaderBases.
"""

__all__ = ["DataLoaderBase"]


class DataLoaderBase:
    def __init__(self):
        self._places = None

    def __call__(self):
        return self

    def next(self):
        """Python 2's spelling of __next__ (Fluid keeps it)."""
        return self.__next__()

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement __iter__")

    def __next__(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement __next__")

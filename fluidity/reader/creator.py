"""paddle.reader.creator: readers made from a numpy array or a text file."""
from ..errors import declined

__all__ = ["np_array", "text_file", "recordio"]


def np_array(x):
    """A reader of the rows of numpy array `x` (x itself when it is 0-d)."""
    if not hasattr(x, "ndim"):
        raise TypeError(f"np_array: x must be a numpy array, got {type(x).__name__}")

    def reader():
        if x.ndim < 1:
            yield x
            return
        yield from x
    return reader


def text_file(path):
    """A reader of the lines of the text file `path`, without their line ends."""
    def reader():
        with open(path) as f:
            for line in f:
                yield line.rstrip("\n")
    return reader


recordio = declined(
    "reader.creator.recordio",
    "RecordIO files are not supported: Fluidity has no RecordIO reader or writer; it reads "
    "MultiSlot text files (fluid.DatasetFactory) and Python readers")

"""What the book chapters' train.py files share: reading a fetched number, and the
`train_test` loop that averages fetches over a test reader."""
import numpy as np


def scalar(v):
    """A fetched loss/metric as a float, whether it is shaped [1] (Fluid 1.x) or [] (0-D)."""
    return float(np.asarray(v).reshape(-1)[0])


def train_test(exe, program, feeder, reader, fetch_list):
    """Mean of each fetch over the batches of `reader` (the book's train_test)."""
    rows = [[scalar(v) for v in exe.run(program, feed=feeder.feed(data),
                                        fetch_list=fetch_list)] for data in reader()]
    return [float(np.mean(col)) for col in zip(*rows)]

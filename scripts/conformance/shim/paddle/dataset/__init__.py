"""Synthetic stand-ins for paddle.dataset's readers: the same sample structure, dtypes and
value ranges as the real data sets, drawn from fixed seeds and small (hundreds of samples), and
learnable (labels come from a fixed rule over the features), so a chapter that trains until its
loss falls under a bound gets there. Nothing is downloaded: `common.download` writes synthetic
files of the real ones' formats for the URLs Paddle's distributed tests fetch and parse
themselves (`_synth_files`), and refuses any other."""
from . import (cifar, common, conll05, flowers, imdb, imikolov, mnist, movielens,  # noqa: F401
               sentiment, uci_housing, wmt14, wmt16)

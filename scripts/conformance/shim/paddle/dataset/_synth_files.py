"""Synthetic stand-ins for the files Paddle 1.8's distributed tests download.

Their helper modules (dist_ctr_reader.py, ctr_dataset_reader.py, dist_simnet_bow.py,
dist_text_classification.py) call `paddle.dataset.common.download(url, ...)` and parse the file
themselves, so a reader stand-in is not enough: `download` returns a file of the real one's
format, built here from a fixed seed. Each generator returns the file's bytes, the same bytes in
every run and process (tar and gzip headers carry a fixed mtime), so concurrent trainers and
pservers that each "download" agree, and an existing file can be checked against them.

The formats, as the helpers parse them:

- avazu_ctr_data.tgz: members avazu_ctr_data/{train,test,infer}.txt, one sample a line,
  `dnn ids (space-separated)<TAB>lr ids as id:value (space-separated)<TAB>click (0/1)`, and
  avazu_ctr_data/data.meta.txt, two lines `dnn_input_dim: N` and `lr_input_dim: M` (the
  embedding sizes: every id is below them).
- simnet.train.1000: one query a line, `;`-terminated fields of space-separated ints:
  `qid;n_pos n_neg;query ids;` then n_pos positive and n_neg negative title id lists, every id
  below dist_simnet_bow's dict_dim (1500).
- imdb.vocab: one word a line (the word's id is its line number).
- text_classification.tar.gz: review texts as members {train,test}/{pos,neg}/<id>_<rating>.txt
  (the helper matches `train/pos/.*\\.txt$` from the member name's start), words of imdb.vocab
  with capitals and punctuation, which the helper strips.
"""
import gzip
import io
import tarfile

from ._synth import rng

_MTIME = 1577836800  # 2020-01-01, fixed so that the archives' bytes are too

AVAZU_URL = "http://paddle-ctr-data.bj.bcebos.com/avazu_ctr_data.tgz"
SIMNET_URL = "http://paddle-dist-ce-data.bj.bcebos.com/simnet.train.1000"
IMDB_VOCAB_URL = "http://paddle-dist-ce-data.bj.bcebos.com/imdb.vocab"
TEXT_CLASSIFICATION_URL = \
    "http://paddle-dist-ce-data.bj.bcebos.com/text_classification.tar.gz"

# sizes: small enough to train in seconds, large enough for every batch the tests read (the
# fleet ctr tests read all of train.txt in batches of 128; the dist tests 5 batches of 2)
AVAZU_DNN_DIM, AVAZU_LR_DIM = 1000, 1000
AVAZU_LINES = {"train.txt": 1000, "test.txt": 200, "infer.txt": 200}
SIMNET_DICT_DIM, SIMNET_LINES = 1500, 1000
IMDB_VOCAB_SIZE, TEXT_DOCS_PER_CLASS = 2000, 25


def _targz(members):
    """A .tar.gz of (name, bytes-or-None for a directory) whose bytes depend only on them."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.mtime = _MTIME
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=_MTIME) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _ids(r, high, lo_len, hi_len):
    return [int(i) for i in r.randint(0, high, int(r.randint(lo_len, hi_len + 1)))]


def avazu_ctr_data():
    """avazu_ctr_data.tgz: click is 1 when most of a line's dnn ids are in the upper half, so
    the ctr models have something to learn."""
    members = [("avazu_ctr_data", None)]
    for name, count in AVAZU_LINES.items():
        r = rng("avazu_ctr_data", name)
        lines = []
        for _ in range(count):
            dnn = _ids(r, AVAZU_DNN_DIM, 8, 20)
            lr = _ids(r, AVAZU_LR_DIM, 8, 20)
            click = int(2 * sum(i >= AVAZU_DNN_DIM // 2 for i in dnn) > len(dnn))
            lines.append("%s\t%s\t%d" % (" ".join(map(str, dnn)),
                                         " ".join("%d:1" % i for i in lr), click))
        members.append(("avazu_ctr_data/" + name, ("\n".join(lines) + "\n").encode()))
    meta = "dnn_input_dim: %d\nlr_input_dim: %d\n" % (AVAZU_DNN_DIM, AVAZU_LR_DIM)
    members.append(("avazu_ctr_data/data.meta.txt", meta.encode()))
    return _targz(members)


def simnet_train():
    """simnet.train.1000: 1 or 2 positive and 1 to 3 negative titles a query."""
    r = rng("simnet", "train")
    lines = []
    for qid in range(SIMNET_LINES):
        n_pos, n_neg = int(r.randint(1, 3)), int(r.randint(1, 4))
        fields = [[qid], [n_pos, n_neg], _ids(r, SIMNET_DICT_DIM, 2, 10)]
        fields += [_ids(r, SIMNET_DICT_DIM, 2, 12) for _ in range(n_pos + n_neg)]
        lines.append("".join(" ".join(map(str, f)) + ";" for f in fields))
    return ("\n".join(lines) + "\n").encode()


def _words():
    """IMDB_VOCAB_SIZE distinct lower-case words (letters only: the tokenizer keeps them)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = []
    for i in range(IMDB_VOCAB_SIZE):
        w, n = "", i
        while True:
            w, n = letters[n % 26] + w, n // 26
            if not n:
                break
        words.append(w)  # i in base 26, no leading "a" but for 0: unique
    return words


def imdb_vocab():
    return ("\n".join(_words()) + "\n").encode()


def text_classification():
    """text_classification.tar.gz: positive reviews draw from the vocabulary's first half,
    negative ones from its second, in sentences with capitals and punctuation."""
    words = _words()
    half = len(words) // 2
    members = []
    for split in ("train", "test"):
        for label, (lo, hi), ratings in (("pos", (0, half), (7, 11)),
                                         ("neg", (half, len(words)), (1, 5))):
            r = rng("text_classification", f"{split}/{label}")
            members.append((f"{split}/{label}", None))
            for doc in range(TEXT_DOCS_PER_CLASS):
                sentences = []
                for _ in range(int(r.randint(1, 5))):
                    ws = [words[int(i)] for i in r.randint(lo, hi, int(r.randint(3, 15)))]
                    ws[0] = ws[0].capitalize()
                    sentences.append(" ".join(ws) + ".,!?"[int(r.randint(0, 4))])
                rating = int(r.randint(*ratings))
                members.append((f"{split}/{label}/{doc}_{rating}.txt",
                                " ".join(sentences).encode()))
    return _targz(members)


GENERATORS = {
    AVAZU_URL: avazu_ctr_data,
    SIMNET_URL: simnet_train,
    IMDB_VOCAB_URL: imdb_vocab,
    TEXT_CLASSIFICATION_URL: text_classification,
}

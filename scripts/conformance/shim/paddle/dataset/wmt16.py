from . import wmt14


def get_dict(lang, dict_size, reverse=False):
    return wmt14.get_dict(dict_size, reverse)[0]


def train(src_dict_size, trg_dict_size, src_lang="en"):
    return wmt14.train(min(src_dict_size, trg_dict_size))


def test(src_dict_size, trg_dict_size, src_lang="en"):
    return wmt14.test(min(src_dict_size, trg_dict_size))


def validation(src_dict_size, trg_dict_size, src_lang="en"):
    return wmt14.test(min(src_dict_size, trg_dict_size))


def fetch():
    pass

from . import imdb


def get_word_dict():
    return sorted(imdb.word_dict().items(), key=lambda kv: kv[1])


def train():
    return imdb.train(imdb.word_dict())


def test():
    return imdb.test(imdb.word_dict())


def fetch():
    pass

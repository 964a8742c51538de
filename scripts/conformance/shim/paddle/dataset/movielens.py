"""movielens-1m's sample structure: [user id, gender, age index, job id, movie id,
[category ids], [title word ids], [rating]], the rating a fixed function of user and movie."""
from ._synth import creator, rng

age_table = [1, 18, 25, 35, 45, 50, 56]
_USERS, _MOVIES, _JOBS, _CATS, _TITLE = 600, 400, 20, 18, 500


def max_user_id():
    return _USERS


def max_movie_id():
    return _MOVIES


def max_job_id():
    return _JOBS


def movie_categories():
    return {f"cat{i}": i for i in range(_CATS)}


def get_movie_title_dict():
    return {f"t{i}": i for i in range(_TITLE)}


def user_info():
    return {}


def movie_info():
    return {}


def _samples(split, count):
    def make():
        r = rng("movielens", split)
        out = []
        for _ in range(count):
            u, m = int(r.randint(1, _USERS + 1)), int(r.randint(1, _MOVIES + 1))
            cats = [int(c) for c in r.randint(0, _CATS, int(r.randint(1, 4)))]
            title = [int(t) for t in r.randint(0, _TITLE, int(r.randint(1, 6)))]
            rating = float(1 + (u * 3 + m * 5) % 5)
            out.append([u, int(u % 2), int(u % len(age_table)), int(u % (_JOBS + 1)), m,
                        cats, title, [rating]])
        return out
    return make


def train():
    return creator(_samples("train", 2000))


def test():
    return creator(_samples("test", 300))


def fetch():
    pass

"""paddle.version as Paddle 1.8's build writes it (some tests ask whether MKL is in)."""
full_version = "1.8.0"
major = "1"
minor = "8"
patch = "0"
rc = "0"
istaged = True
commit = "89c76a53"
with_mkl = "OFF"


def show():
    print(f"full_version: {full_version}\ncommit: {commit}")


def mkl():
    return with_mkl

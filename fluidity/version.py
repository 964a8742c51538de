"""The Fluid version Fluidity stands in for, laid out as Paddle's `paddle.version`:
`require_version` compares a program's wish against `major.minor.patch.rc` read from here
at call time, as Fluid reads its installed version, so code (or a test) that changes these
names changes what `require_version` sees. Fluidity implements Fluid's 1.8 API, so that is
the version a Fluid program finds; Fluidity's own release is `fluidity.__version__`.
A version of all zeros means a development build: `require_version` then only warns."""
full_version = "1.8.0"
major = "1"
minor = "8"
patch = "0"
rc = "0"
istaged = False
# the commit of Paddle whose Fluid API this stands for (the 1.8 branch point), where Paddle
# names the commit it was built from
commit = "89c76a53"
with_mkl = "OFF"


def show():
    """Print the Fluid version this build implements."""
    print(f"full_version: {full_version}\nmajor: {major}\nminor: {minor}\npatch: {patch}\n"
          f"rc: {rc}\ncommit: {commit}")


def mkl():
    return with_mkl

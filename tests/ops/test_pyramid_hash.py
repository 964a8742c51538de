"""pyramid_hash refuses a program file's bad sizes when it runs."""
import pytest


def test_a_program_files_bad_sizes_are_refused_when_run():
    """Attributes a loaded program carries past the build-time checks (rand_len 0) are an
    error naming the op before anything is allocated or divided."""
    from fluidity.errors import ShapeError
    from fluidity.ops import registry
    attrs = dict(registry.get("pyramid_hash").defaults(), num_emb=8, rand_len=0, space_len=4)
    with pytest.raises(ShapeError, match="pyramid_hash: num_emb 8"):
        registry.get("pyramid_hash").prepare(attrs, {"Out"})

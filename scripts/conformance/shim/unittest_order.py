"""A pytest plugin of the conformance run: test classes in the order `python -m unittest`
runs them (by name), which is how Paddle's CI runs its test files. pytest's own order (as the
classes are defined) differs, and Paddle's tests share one default program and scope across
classes, so a file can pass in one order and not in the other. Methods keep pytest's order
(by name within a class, as unittest's)."""


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: getattr(getattr(item, "cls", None), "__name__", ""))

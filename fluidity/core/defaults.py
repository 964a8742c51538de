"""The process-wide default programs (Fluid's `default_main_program()` and
`default_startup_program()`), held here, below both the builder that makes them and the
executor that runs "the default main program" when `exe.run()` names none, so that the
executor needs no import of the builder. The builder (fluidity/framework.py) sets them."""
_programs = {"main": None, "startup": None}


def main_program():
    """The default main program, or None before the builder has made one."""
    return _programs["main"]


def startup_program():
    return _programs["startup"]


def set_main_program(program):
    """Make `program` the default main program; returns the previous one."""
    old, _programs["main"] = _programs["main"], program
    return old


def set_startup_program(program):
    old, _programs["startup"] = _programs["startup"], program
    return old

"""paddle.check_import_scipy as Paddle 1.8 has it: on Windows ('nt'), an ImportError of scipy
that says a DLL failed to load is raised again with the hint to install the VC++ runtime."""


def check_import_scipy(OsName):
    if OsName != "nt":
        return
    try:
        import scipy.io  # noqa: F401
    except ImportError as e:
        if "DLL load failed" in str(e):
            raise ImportError(f"{e}\nplease download visual C++ Redistributable for vs 2015, "
                              f"https://www.microsoft.com/en-us/download/details.aspx?id=48145")

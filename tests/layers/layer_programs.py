"""Shared by the layer tests: build a program with `build()` under fresh main/startup
programs, run the startup, run main with `feed` and fetch what build returned."""
import fluidity as fluid


def run_built(build, feed=None):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs = build()
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(main, feed=feed or {}, fetch_list=outs)

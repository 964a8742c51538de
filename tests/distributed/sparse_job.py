"""A parameter-server job inside the test process: each pserver and each trainer a thread
with its own Executor and Scope, talking gRPC over loopback (free ports). Faster than
launching processes, and the programs are the ones `fluid.DistributeTranspiler` writes, run
as a Fluid script runs them.

    run_job(build, batch, steps, trainers=2, pservers=2, sync=True, config=None)
        -> JobResult(init, final, losses, client_bytes)

`build()` returns (main, startup, loss) seeded; `batch(step, trainer_id)` the feed dict of
one trainer; `single_process(build, batch_all, steps, init)` trains the same model in one
process on `batch_all(step)` from the initial values `init`."""
import threading
import time
from collections import namedtuple

import numpy as np

import fluidity as fluid
from fluidity.distributed.launch import free_ports

JobResult = namedtuple("JobResult", "init final losses trainer_programs pserver_programs "
                                    "pserver_scopes endpoints")


def params(prog, scope):
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in prog.global_block().all_parameters()
            if scope.find_var(p.name) is not None and
            scope.find_var(p.name).value is not None}


# program building uses process-wide defaults (program_guard, unique_name): one at a time
_BUILD = threading.Lock()


def _transpile(build, tid, eps, trainers, sync, config):
    with _BUILD:
        main, start, loss = build()
        t = fluid.DistributeTranspiler(config)
        t.transpile(tid, program=main, pservers=",".join(eps), trainers=trainers,
                    sync_mode=sync, startup_program=start)
    return t, main, start, loss


def run_job(build, batch, steps, trainers=2, pservers=2, sync=True, config=None,
            timeout=60.0, before_close=None, on_step=None):
    eps = [f"127.0.0.1:{p}" for p in free_ports(pservers)]
    errors, threads = [], []
    init, final, losses, tprogs, pprogs, pscopes = {}, {}, {}, {}, {}, {}

    def guarded(fn):
        def run(*a):
            try:
                fn(*a)
            except BaseException as e:  # noqa: BLE001 - reported by the caller
                errors.append(e)
        return run

    @guarded
    def pserver(ep):
        t, *_ = _transpile(build, 0, eps, trainers, sync, config)
        pmain, pstart = t.get_pserver_programs(ep)
        pprogs[ep] = pmain
        exe = fluid.Executor(fluid.CPUPlace())
        scope = pscopes[ep] = fluid.Scope()
        exe.run(pstart, scope=scope)
        exe.run(pmain, scope=scope)

    @guarded
    def trainer(tid):
        t, main, start, loss = _transpile(build, tid, eps, trainers, sync, config)
        prog = t.get_trainer_program()
        tprogs[tid] = prog
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        try:
            exe.run(start, scope=scope)
            init[tid] = params(main, scope)
            losses[tid] = []
            for step in range(steps):
                if on_step is not None:
                    on_step(tid, step, exe)
                (lv,) = exe.run(prog, feed=batch(step, tid), fetch_list=[loss], scope=scope)
                losses[tid].append(float(np.asarray(lv).reshape(-1)[0]))
            final[tid] = params(main, scope)
            if before_close is not None:
                before_close(tid, exe, scope)
        finally:
            try:
                exe.close()        # goodbye, also from a failed trainer: the servers end
            except Exception:      # noqa: BLE001 - the trainer's own error is the one to see
                if not errors:
                    raise

    for ep in eps:
        threads.append(threading.Thread(target=pserver, args=(ep,), daemon=True))
    for tid in range(trainers):
        threads.append(threading.Thread(target=trainer, args=(tid,), daemon=True))
    for th in threads:
        th.start()
    end = time.monotonic() + timeout
    while any(th.is_alive() for th in threads) and not errors:
        if time.monotonic() > end:
            raise TimeoutError(f"the job did not finish within {timeout} s")
        time.sleep(0.02)
    if errors:      # the other threads are daemons, stopped with the test process
        raise errors[0]
    return JobResult(init, final, losses, tprogs, pprogs, pscopes, eps)


def single_process(build, batch_all, steps, init):
    """(final params, losses) of one process training on `batch_all(step)`."""
    main, start, loss = build()
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(start, scope=scope)
    for name, value in init.items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    losses, per_step = [], []
    for step in range(steps):
        (lv,) = exe.run(main, feed=batch_all(step), fetch_list=[loss], scope=scope)
        losses.append(float(np.asarray(lv).reshape(-1)[0]))
        per_step.append(params(main, scope))
    return params(main, scope), losses

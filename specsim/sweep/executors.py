"""Executors: run a list of point tasks and yield their records as they finish.

``serial`` (in this process), ``process`` (a local process pool, the default), ``ray`` and ``dask``
(optional extras, imported only when chosen; they connect to ``address`` or start a local cluster).
Records are returned to the driver, which writes them, so workers need no shared file system. A
point's numbers depend only on its configuration, so every executor gives identical records
(wall_time_s aside).

Every executor has the signature ``(tasks, jobs, address, on_start) -> Iterator[record]``, where
``on_start(points)`` is told which points are running whenever that changes.
"""

from __future__ import annotations

from typing import Callable, Iterator

from specsim.errors import SpecsimInputError
from specsim.sweep.point import PointTask, run_point
from specsim.sweep.spec import SweepPoint

EXECUTORS = ("serial", "process", "ray", "dask")

OnStart = Callable[[list[SweepPoint]], None]
#: ``(tasks, jobs, address, on_start) -> Iterator[record]``
Executor = Callable[..., Iterator[dict]]


def _iter_serial(tasks: list[PointTask], jobs: int, address: str | None, on_start: OnStart) -> Iterator[dict]:
    for t in tasks:
        on_start([t.point])
        yield run_point(t)


def _iter_process(tasks: list[PointTask], jobs: int, address: str | None, on_start: OnStart) -> Iterator[dict]:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    import multiprocessing as mp

    # fork where the platform has it: workers start warm (the parent's imports, models and kernels) and
    # scripts need no ``if __name__ == "__main__"`` guard. A progress callback must not leave threads
    # holding locks a child could inherit. Elsewhere spawn (then the guard applies).
    from specsim.sweep.warm import distinct_tasks, warm_up

    fork = "fork" in mp.get_all_start_methods()
    ctx = mp.get_context("fork" if fork else "spawn")
    if fork:                 # warm once here (imports, acceptance models, kernels): every child inherits it
        warm_up(tasks)
        ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_start)
    else:                    # spawned workers warm themselves once, then take many points
        ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_start,
                                 initargs=(distinct_tasks(tasks),))
    pending = {}
    queue = list(tasks)
    try:
        while queue or pending:
            while queue and len(pending) < 2 * jobs:   # bounded in flight: the running list stays honest
                t = queue.pop(0)
                pending[ex.submit(run_point, t)] = t
            on_start([t.point for t in pending.values()])
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                pending.pop(fut)
                yield fut.result()
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def _worker_start(tasks: list[PointTask] | None = None) -> None:
    """A pool worker's start: Ctrl-C (SIGINT reaches the whole process group) ends it at once and quietly, as
    the parent reports the interruption and keeps every finished record (workers write none: the parent writes
    each record as its result arrives); a worker forked from a parent that ignores SIGINT (a job a shell started
    in the background) ignores it too, so the pool does not break under a parent that runs on; then, for spawned
    workers, :func:`warm_up` on ``tasks``."""
    import os
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    if tasks is not None:
        from specsim.sweep.warm import warm_up

        warm_up(tasks)


def _iter_ray(tasks: list[PointTask], jobs: int, address: str | None, on_start: OnStart) -> Iterator[dict]:
    try:
        import ray
    except ImportError:
        raise SpecsimInputError("--executor", None, "executor", "ray installed (pip install 'specsim[ray]')",
                                "ray is not installed") from None
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=jobs, log_to_driver=False, include_dashboard=False)
    remote = ray.remote(num_cpus=1)(run_point)
    refs = {remote.remote(t): t for t in tasks}
    while refs:
        on_start([t.point for t in refs.values()][:jobs])
        ready, _ = ray.wait(list(refs), num_returns=1)
        for r in ready:
            refs.pop(r)
            yield ray.get(r)


def _dask_client(jobs: int, address: str | None):
    """(client, local cluster or None): connect to ``address`` or start a local process cluster."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SpecsimInputError("--executor", None, "executor",
                                "dask installed (pip install 'specsim[dask]')", "dask is not installed") from None
    if address:
        return Client(address), None
    cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
    return Client(cluster), cluster


def _iter_dask(tasks: list[PointTask], jobs: int, address: str | None, on_start: OnStart) -> Iterator[dict]:
    client, cluster = _dask_client(jobs, address)
    from distributed import as_completed

    try:
        futs = {client.submit(run_point, t, key=f"specsim-point-{t.point.id}", pure=False): t for t in tasks}
        on_start([x.point for x in futs.values()][:jobs])
        for fut in as_completed(list(futs)):
            futs.pop(fut)
            on_start([x.point for x in futs.values()][:jobs])
            yield fut.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


_EXECUTORS: dict[str, Executor] = {"serial": _iter_serial, "process": _iter_process, "ray": _iter_ray,
                                   "dask": _iter_dask}


def get_executor(name: str) -> Executor:
    """The executor called ``name`` (one of :data:`EXECUTORS`).

    Raises:
        SpecsimInputError: an unknown name (naming ``--executor``).
    """
    if name not in _EXECUTORS:
        raise SpecsimInputError("--executor", None, "executor", f"one of {EXECUTORS}", repr(name))
    return _EXECUTORS[name]

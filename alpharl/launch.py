"""Starting G data-parallel ranks of ``alpharl train --gpus G``: spawned processes on one host, or Ray
actors with one GPU each across a cluster (``--ray-address``). Every rank runs ``run.train`` with its
communicator (alpharl.comm): NCCL on the cuda backend (rank 0's unique id handed over the ranks'
queues), the host stand-in on the CPU backends (numpy, sim). ``NCCL_NVLS_ENABLE=0`` in every rank.

A rank that fails stops the others: the launcher ends them and reports the first failure in one line.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
from multiprocessing.connection import wait

from alpharl import target
from alpharl.comm import NCCL_ENV, NcclComm, NumpyRanks, QueueChannel, RankError
from alpharl.config import ConfigError, TrainConfig

#: Exit status of a rank whose error was bad input (alpharl.cli.errors.EXIT_BAD_INPUT's value).
RANK_BAD_INPUT = 2


def visible_gpus() -> int:
    """GPUs this process may use (0 where numba runs the CUDA simulator)."""
    if target.active() != target.GPU:
        return 0
    from numba import cuda

    return len(cuda.gpus)


def check_gpus(config: TrainConfig, backend: str, ray_address: str | None = None) -> None:
    """--gpus against what runs the ranks (ConfigError, one line): on the cuda backend one GPU per rank
    on this host (a Ray cluster counts its own); on the CPU backends (numpy, sim) the ranks are processes."""
    g = config.gpus
    if ray_address is not None or g == 1:
        return
    if backend == "cuda":
        seen = visible_gpus()
        if g > seen:
            raise ConfigError(f"--gpus {g}: this machine sees {seen} GPU(s)")
    if backend != "cuda" and config.backend == "auto":
        raise ConfigError(f"--gpus {g}: no GPU here; --backend numpy or sim runs the {g} ranks on the CPU")


def _communicator(channel: QueueChannel, backend: str):
    return NcclComm(channel) if backend == "cuda" else NumpyRanks(channel)


def rank_main(rank: int, size: int, config: TrainConfig, resume: str | None, up, down, backend: str,
              quiet: bool, results=None, task=None):
    """One rank: its communicator, then ``task(config, resume, comm, dashboard)`` (default: ``run.train``).
    Rank 0's result goes to ``results`` (a queue) and is returned."""
    from alpharl import run
    from alpharl.dashboard import Dashboard

    comm = _communicator(QueueChannel(rank, size, up, down), backend)
    try:
        if task is None:
            with Dashboard(total_steps=config.steps, b=config.b, quiet=quiet) as dash:
                out = run.train(config, resume=resume, dashboard=dash, comm=comm)
        else:
            out = task(config, resume, comm)
    finally:
        comm.close()
    if rank == 0 and results is not None:
        results.put(out)
    return out


def _process_main(rank, size, config, resume, up, down, backend, quiet, results, task):
    """A spawned rank: errors as one line on stderr and an exit status the launcher reports."""
    from alpharl.cli.errors import ONE_LINE_ERRORS

    try:
        rank_main(rank, size, config, resume, up, down, backend, quiet, results, task)
    except ONE_LINE_ERRORS as exc:
        os.write(2, f"alpharl: error: rank {rank}: {' '.join(str(exc).split())}\n".encode())
        raise SystemExit(RANK_BAD_INPUT) from None


def launch(config: TrainConfig, resume: str | None = None, backend: str = "numpy", quiet: bool = True,
           ray_address: str | None = None, task=None):
    """Run config.gpus ranks to the end; rank 0's result (``run.train``'s summary, or ``task``'s).
    task(config, resume, comm): what each rank runs instead of training (the benchmark's timed steps)."""
    if ray_address is not None:
        return _launch_ray(config, resume, backend, quiet, ray_address, task)
    ctx = mp.get_context("spawn")
    g = config.gpus
    up, results = ctx.Queue(), ctx.Queue()
    down = [None] + [ctx.Queue() for _ in range(1, g)]
    procs = []
    saved = {k: os.environ.get(k) for k in (*NCCL_ENV, "CUDA_VISIBLE_DEVICES")}
    try:
        for r in range(g):
            # A spawned child takes this environment at start, before its CUDA driver starts: one GPU each.
            os.environ.update(NCCL_ENV)
            if backend == "cuda":
                os.environ["CUDA_VISIBLE_DEVICES"] = str(r)
            p = ctx.Process(target=_process_main, name=f"alpharl-rank{r}",
                            args=(r, g, config, resume, up, down, backend, quiet, results, task))
            p.start()
            procs.append(p)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return _supervise(procs, results)


def _supervise(procs, results):
    """Wait for every rank; the first that fails ends the others (RankError, one line)."""
    out, live = None, {p.sentinel: p for p in procs}
    try:
        while live:
            for s in wait(list(live)):
                p = live.pop(s)
                p.join()
                if p.exitcode != 0:
                    rank = procs.index(p)
                    why = "bad input (its line above)" if p.exitcode == RANK_BAD_INPUT else f"exit status {p.exitcode}"
                    raise RankError(f"rank {rank} of {len(procs)} failed ({why}); the other ranks were stopped")
                if p is procs[0]:
                    out = results.get(timeout=60)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join()
    return out


class _RayRank:
    """A Ray actor: one rank (``rank_main``) with one GPU on the cuda backend."""

    def run(self, rank, size, config, resume, up, down, backend, task):
        os.environ.update(NCCL_ENV)
        return rank_main(rank, size, config, resume, up, down, backend, True, None, task)


def import_ray():
    try:
        import ray  # the optional extra alpharl[ray]
    except ImportError:
        raise ConfigError("--ray-address: Ray is not installed (pip install 'alpharl[ray]')") from None
    return ray


def _launch_ray(config: TrainConfig, resume, backend: str, quiet: bool, address: str, task):
    """The ranks as Ray actors (one GPU each on the cuda backend); their nodes must see the run directory
    and the data at the same paths. Rank 0's result."""
    ray = import_ray()
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=not quiet, logging_level=logging.ERROR,
                 runtime_env={"env_vars": dict(NCCL_ENV)})
    except Exception as exc:  # noqa: BLE001 - any failure to reach Ray is one line
        raise ConfigError(f"--ray-address {address}: cannot start Ray ({str(exc).splitlines()[-1][:200]})") from None
    from ray.util.queue import Queue

    g = config.gpus
    try:
        up, down = Queue(), [None] + [Queue() for _ in range(1, g)]
        actor = ray.remote(num_gpus=1 if backend == "cuda" else 0, max_restarts=0)(_RayRank)
        ranks = [actor.remote() for _ in range(g)]
        refs = [a.run.remote(r, g, config, resume, up, down, backend, task) for r, a in enumerate(ranks)]
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            try:
                ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - one rank's failure stops all
                for a in ranks:
                    ray.kill(a)
                line = [ln for ln in str(exc).splitlines() if ln.strip()][-1:] or [type(exc).__name__]
                raise RankError(f"rank {refs.index(ready[0])} of {g} failed ({line[0].strip()[:200]}); "
                                "the other ranks were stopped") from None
        return ray.get(refs[0])
    finally:
        ray.shutdown()

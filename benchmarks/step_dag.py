"""The shape of one training step's graph without a GPU: its nodes and its critical path, the numbers
``alpharl bench`` reads from the captured graph (``CapturedGraph.n_nodes``, ``critical_path()``).

The step's body runs under the CUDA simulator with every kernel launch recorded, not run: a launch or the
copy of s_t is a node after the last node on its stream, and ``Branches.fork`` / ``join`` add the edges
their event record / wait give a captured graph. At ``alpharl bench``'s step (K = 1, M = 256) this gives
the 45 nodes and the 28-node critical path the H200 measured at B = 16 before the first PER draw moved
to a branch (benchmarks/results/NOTES.md, 2026-12-02).

    python benchmarks/step_dag.py --b 16 --b 4096
"""
from __future__ import annotations

import argparse
from contextlib import contextmanager

from alpharl import graph
from alpharl.backends import device
from alpharl.cuda_kernels import registry


class StepDag:
    """The recorded nodes (kernel names) and each node's dependencies (indices of earlier nodes)."""

    def __init__(self):
        self.names: list[str] = []
        self.deps: list[set[int]] = []
        self._last: dict[int, int] = {}      # stream -> its last node
        self._waits: dict[int, set[int]] = {}  # stream -> nodes its next node waits for (event waits)

    @staticmethod
    def _key(stream) -> int:
        return 0 if stream is None or stream == 0 else id(stream)

    def node(self, name: str, stream) -> None:
        s = self._key(stream)
        deps = self._waits.pop(s, set())
        if s in self._last:
            deps.add(self._last[s])
        self.names.append(name)
        self.deps.append(deps)
        self._last[s] = len(self.names) - 1

    def wait(self, waiting, on) -> None:
        """``waiting``'s next node depends on ``on``'s last node (an event recorded on ``on``, waited on)."""
        src = self._last.get(self._key(on))
        if src is not None:
            self._waits.setdefault(self._key(waiting), set()).add(src)

    def depths(self) -> list[int]:
        edges = [(j, i) for i, deps in enumerate(self.deps) for j in deps]
        d = graph.chain_depths(range(len(self.names)), edges)
        return [d[i] for i in range(len(self.names))]

    def critical_chain(self) -> list[str]:
        """The kernels of one longest chain, first to last."""
        depth = self.depths()
        i = max(range(len(depth)), key=depth.__getitem__)
        chain = [i]
        while self.deps[i]:
            i = max(self.deps[i], key=depth.__getitem__)
            chain.append(i)
        return [self.names[j] for j in reversed(chain)]


@contextmanager
def recording(dag: StepDag):
    """Kernel launches, the s_t copy and the step's branch forks and joins go to dag instead of running."""
    originals = (registry.Kernel.__getitem__, graph.Branches.fork, graph.Branches.join,
                 device.DeviceBackend.keep_obs)

    def launch(kernel, config):
        return lambda *args: dag.node(kernel.name, config[2] if len(config) > 2 else None)

    def fork(branches, i):
        dag.wait(branches.sides[i], branches.main)
        return branches.sides[i]

    def join(branches, i):
        dag.wait(branches.main, branches.sides[i])

    def keep_obs(ops):
        dag.node("copy s_t", ops.branches.fork(device.BRANCH_OBS))

    registry.Kernel.__getitem__, graph.Branches.fork, graph.Branches.join = launch, fork, join
    device.DeviceBackend.keep_obs = keep_obs
    try:
        yield dag
    finally:
        (registry.Kernel.__getitem__, graph.Branches.fork, graph.Branches.join,
         device.DeviceBackend.keep_obs) = originals


def step_dag(trainer) -> StepDag:
    """The graph a capture of trainer's next step (a sim-backend trainer past its first step) would record."""
    if trainer.backend != "sim" or trainer.steps_done == 0:
        raise ValueError("step_dag: a sim-backend trainer past its first step (graphs are captured from the "
                         "second)")
    with recording(StepDag()) as dag:
        trainer._step_body(trainer.phase())
    return dag


def main() -> None:
    from alpharl.bench import bench_config
    from alpharl.lobster.sample import load_embedded
    from alpharl.trainer import IntegratedTrainer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--b", type=int, action="append", help="batch sizes B (repeat; default 16)")
    ap.add_argument("--minibatch", type=int, default=256, help="replay minibatch M (alpharl bench's: 256)")
    args = ap.parse_args()
    market = load_embedded()
    for b in args.b or [16]:
        # alpharl bench's step (alpharl.bench.bench_b), on the simulator
        cfg = bench_config(b, backend="sim", minibatch=args.minibatch)
        tr = IntegratedTrainer(cfg, market)
        tr.steps_done = 1  # the body a graph is captured from (its replay is not empty)
        dag = step_dag(tr)
        print(f"B = {b}: {len(dag.names)} nodes, critical path {max(dag.depths())}: "
              + " -> ".join(dag.critical_chain()))


if __name__ == "__main__":
    main()

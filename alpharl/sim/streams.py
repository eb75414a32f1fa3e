"""Several files behind one simulator: ``MultiLobSim`` (device) over one ``LobSim`` per file.

A dataset of S training files (alpharl.dataset) is S streams on the device.
Backtest b of the run replays stream b mod S, as that stream's backtest
j = b // S (``StreamLayout``); each stream is an unchanged ``LobSim`` over its
own backtests, drawing the PRNG lanes of the run's backtests it holds (so a
backtest draws the same episode starts whichever stream it replays). The
composite has the interface of one simulator: ``obs`` [B, obs_dim], ``out``
[N_OUT, B] (and StepOutputs' names for its rows), ``step(actions [B])``,
``reset``, ``state_dict`` / ``load_state_dict``, ``field``, ``fills_snapshot``.

The streams write into stream-major views of one actions, one observation and
one output array; a step is the gather of the actions into the streams' slot
order, each stream's ``lobsim_step``, and the scatter of their observations and
outputs into the run's order (alpharl.cuda_kernels.lobsim.streams: S + 2
launches, all on the simulator's stream, so the step is captured in the CUDA
graph as one file's is). ``alpharl.reference.lobsim.streams.ReferenceMultiLobSim``
is the same over ReferenceLobSims (the numpy backend). One file takes
``LobSim`` itself (``make_lobsim``): its path is unchanged.

The state of a composite (checkpoints) is each stream's state under ``s<k>.``
and ``backtest_stream`` int32[B] (the stream of each backtest), checked on load.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import cuda

from alpharl.cuda_kernels.lobsim import streams as K
from alpharl.dataset import check_obs_dims, file_labels
from alpharl.sim import layout as L
from alpharl.sim.lobsim import LobSim
from alpharl.sim.outputs import StepOutputs

#: Key of the per-backtest stream index in a composite's state.
BACKTEST_STREAM = "backtest_stream"


def stream_key(s: int, key: str) -> str:
    """The key of stream s's state entry ``key`` in the composite's state."""
    return f"s{s}.{key}"


class StreamLayout:
    """Where each of B backtests lives among S streams: stream b mod S, local index b // S, and
    slot off_s + b // S of the streams' stream-major arrays (module doc of the kernels)."""

    def __init__(self, n_backtests: int, n_streams: int):
        if not 1 <= n_streams <= n_backtests:
            raise ValueError(f"{n_backtests} backtests cannot cover {n_streams} streams (at least one each)")
        b, s = int(n_backtests), int(n_streams)
        self.B, self.S = b, s
        #: The backtests of stream k, in its local order.
        self.members = [np.arange(k, b, s) for k in range(s)]
        self.counts = [len(m) for m in self.members]
        self.offsets = [int(x) for x in np.concatenate([[0], np.cumsum(self.counts)[:-1]])]
        backtest = np.arange(b)
        stream, local = backtest % s, backtest // s
        self.stream_of = stream.astype(np.int32)
        slot = np.asarray(self.offsets)[stream] + local
        #: slot -> backtest (the gather's permutation).
        self.perm = np.concatenate(self.members).astype(np.int32)
        self.table = np.zeros((K.N_STREAM_COLS, b), np.int32)
        self.table[K.ST_ROW] = slot
        self.table[K.ST_OUT] = L.N_OUT * np.asarray(self.offsets)[stream] + local
        self.table[K.ST_STRIDE] = np.asarray(self.counts)[stream]

    def interleave(self, parts: Sequence[np.ndarray]) -> np.ndarray:
        """The streams' per-backtest arrays (axis 0: their backtests) as one array in backtest order."""
        first = np.asarray(parts[0])
        out = np.empty((self.B,) + first.shape[1:], first.dtype)
        for members, part in zip(self.members, parts):
            out[members] = part
        return out

    def slot_views(self, actions, obs, out_flat, k: int):
        """Stream k's contiguous views: (actions [B_k], obs [B_k, D], out [N_OUT, B_k])."""
        a, n = self.offsets[k], self.counts[k]
        return actions[a:a + n], obs[a:a + n], out_flat[L.N_OUT * a:L.N_OUT * (a + n)].reshape(L.N_OUT, n)


class StreamsBase(StepOutputs):
    """What the device and the reference composite share (host side): layout, state, fields."""

    streams: list
    layout: StreamLayout

    def _setup(self, markets: Sequence, params, n_backtests: int, seed: int, make) -> None:
        """Build one simulator per market with ``make(market, n, lanes)``; check their observations agree."""
        if len(markets) < 2:
            raise ValueError("a composite simulator needs two streams or more (one file: LobSim itself)")
        self.params = params
        self.B = int(n_backtests)
        self.E = params.events_per_step
        self.seed = int(seed)
        self.layout = StreamLayout(self.B, len(markets))
        self.labels = file_labels(markets)
        self.streams = [make(m, n, lanes) for m, n, lanes in zip(markets, self.layout.counts, self.layout.members)]
        dims = [sim.obs_dim for sim in self.streams]
        check_obs_dims(self.labels, dims)
        self.obs_dim = dims[0]

    @property
    def n_streams(self) -> int:
        return self.layout.S

    def _host(self, x) -> np.ndarray:
        return x.copy_to_host() if hasattr(x, "copy_to_host") else np.array(x)

    def state_dict(self) -> dict:
        """Each stream's state under ``s<k>.``, and the stream of each backtest."""
        d = {BACKTEST_STREAM: self.layout.stream_of.copy()}
        for k, sim in enumerate(self.streams):
            d |= {stream_key(k, key): v for key, v in sim.state_dict().items()}
        return d

    def load_state_dict(self, d: dict) -> None:
        got = np.asarray(d[BACKTEST_STREAM])
        if got.shape != self.layout.stream_of.shape or not np.array_equal(got, self.layout.stream_of):
            raise ValueError(f"the state spreads {got.size} backtests over {int(got.max(initial=-1)) + 1} files; "
                             f"this simulator {self.B} over {self.n_streams}")
        for k, sim in enumerate(self.streams):
            prefix = stream_key(k, "")
            sim.load_state_dict({key[len(prefix):]: v for key, v in d.items() if key.startswith(prefix)})
        self._scatter()

    def field(self, name: str) -> np.ndarray:
        """Host copy of one state field by name (layout.STATE_I_NAMES / STATE_F_NAMES), [B], backtest order."""
        return self.layout.interleave([self._host(sim.field(name)) for sim in self.streams])

    def fills_snapshot(self):
        """(fills_i, fills_f, fills_t, fill_head) host copies in backtest order (prices in each file's ticks)."""
        parts = [sim.fills_snapshot() for sim in self.streams]
        return tuple(self.layout.interleave([p[i] for p in parts]) for i in range(len(parts[0])))

    def stream_outputs(self, k: int):
        """Stream k's own output array [N_OUT, B_k] (the rows of its backtests, in its order)."""
        return self.streams[k].out

    def _scatter(self) -> None:  # the observations and outputs into the run's order
        raise NotImplementedError


class MultiLobSim(StreamsBase):
    """B backtests over several replayed files on one device (module doc); markets: MarketData each."""

    def __init__(self, markets: Sequence, params, n_backtests: int, seed: int, stream=None):
        self.stream = stream if stream is not None else cuda.default_stream()
        st = self.stream
        self._setup(markets, params, n_backtests, seed,
                    lambda m, n, lanes: LobSim(m, params, n, seed, stream=st, lanes=lanes))
        B, D = self.B, self.obs_dim
        lay = self.layout
        self.actions_sm = cuda.device_array(B, np.int32, stream=st)
        self.obs_sm = cuda.device_array((B, D), np.float32, stream=st)
        self.out_sm = cuda.device_array(L.N_OUT * B, np.float32, stream=st)
        self._actions = []
        for k, sim in enumerate(self.streams):
            acts, sim.obs_d, sim.out = lay.slot_views(self.actions_sm, self.obs_sm, self.out_sm, k)
            self._actions.append(acts)
        self.perm = cuda.to_device(lay.perm, stream=st)
        self.table = cuda.to_device(lay.table, stream=st)
        self.obs_d = cuda.device_array((B, D), np.float32, stream=st)
        self.out = cuda.device_array((L.N_OUT, B), np.float32, stream=st)
        self._gather_grid = K.gather_grid(B)
        self._scatter_grid = K.scatter_grid(B, D, L.N_OUT)

    def reset(self) -> None:
        """Every backtest of every stream starts afresh from the seed (not capturable)."""
        for sim in self.streams:
            sim.reset()
        self._scatter()

    def step(self, actions) -> None:
        """One env step; ``actions`` int32[B] device array. Launches only (graph-capturable)."""
        K.lobsim_streams_gather[self._gather_grid, K.STREAMS_BLOCK, self.stream](actions, self.perm, self.actions_sm)
        for sim, acts in zip(self.streams, self._actions):
            sim.step(acts)
        self._scatter()

    def _scatter(self) -> None:
        K.lobsim_streams_scatter[self._scatter_grid, K.STREAMS_BLOCK, self.stream](
            self.obs_sm, self.out_sm, self.table, self.obs_d, self.out)

    @property
    def obs(self):
        """float32[B, obs_dim] device array: the observation for the next action, backtest order."""
        return self.obs_d

    def state_dict(self) -> dict:
        self.stream.synchronize()
        return super().state_dict()

    def load_state_dict(self, d: dict) -> None:
        super().load_state_dict(d)
        self.stream.synchronize()


def make_lobsim(market, params, n_backtests: int, seed: int, stream=None):
    """The device simulator of ``market``: a MarketData or SyntheticMarket (LobSim), or a sequence of
    MarketData, one stream each (MultiLobSim; one of them alone: LobSim, today's path)."""
    if isinstance(market, (list, tuple)):
        if len(market) == 1:
            return LobSim(market[0], params, n_backtests, seed, stream=stream)
        return MultiLobSim(market, params, n_backtests, seed, stream=stream)
    return LobSim(market, params, n_backtests, seed, stream=stream)

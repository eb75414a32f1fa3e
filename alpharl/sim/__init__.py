"""Host side of the LOB simulator (SPEC §3).

- :class:`SimParams` / :class:`SynthParams`: typed, documented configuration;
- :mod:`alpharl.sim.layout`: every device layout (state rows, observation
  offsets, outputs, fill records) defined once, with :func:`obs_dim`;
- :class:`LobSim`: B backtests on the GPU (device buffers, launch order);
  ``alpharl.reference.lobsim.ReferenceLobSim`` is the same on host arrays;
- :class:`SyntheticMarket`: the Poisson order-flow market, usable in place of
  a MarketData;
- :class:`FillsLog` / :func:`drain_fills`: the fills log (Arrow IPC);
- :func:`run_script`: the scripted driver.
"""
from alpharl.sim.driver import ScriptResult, run_script
from alpharl.sim.fills import FILLS_SCHEMA, FillsLog, drain_fills, read_fills
from alpharl.sim.layout import obs_dim, obs_names
from alpharl.sim.lobsim import LobSim
from alpharl.sim.market import SyntheticMarket, replay_stream
from alpharl.sim.params import SimParams, SynthParams

__all__ = ["SimParams", "SynthParams", "LobSim", "SyntheticMarket", "replay_stream", "obs_dim", "obs_names",
           "FillsLog", "drain_fills", "read_fills", "FILLS_SCHEMA", "run_script", "ScriptResult"]

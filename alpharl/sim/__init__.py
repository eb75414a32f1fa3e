"""Host side of the LOB simulator (SPEC §3). Import from the defining module;
this package imports nothing, so a kernel can import the leaf
:mod:`alpharl.sim.layout` without loading the simulator's host side.

- :mod:`alpharl.sim.params`: ``SimParams`` / ``SynthParams``, typed, documented configuration;
- :mod:`alpharl.sim.layout`: every device layout (state rows, observation
  offsets, outputs, fill records) defined once, with ``obs_dim``; a leaf module;
- :mod:`alpharl.sim.lobsim`: ``LobSim``, B backtests on the GPU (device buffers,
  launch order); ``alpharl.reference.lobsim.ReferenceLobSim`` is the same on host arrays;
- :mod:`alpharl.sim.streams`: ``MultiLobSim``, several files behind one simulator (one LobSim
  per file, backtest b on file b mod S); ``make_lobsim`` picks it or LobSim;
- :mod:`alpharl.sim.market`: ``SyntheticMarket``, the Poisson order-flow market,
  usable in place of a MarketData;
- :mod:`alpharl.sim.fills`: ``FillsLog`` / ``drain_fills``, the fills log (Arrow IPC);
- :mod:`alpharl.sim.driver`: ``run_script``, the scripted driver;
- :mod:`alpharl.sim.features`: ``FeatureEnv``, the synthetic feature/reward process.
"""

"""PRNG stream ids of the simulator (see alpharl.prng.seed_states): each consumer of
random numbers seeds its own stream from the run seed, so the simulator's draws
never overlap the actor's or the replay's."""

#: Episode start offsets and the probabilistic queue model's Bernoulli draws, one lane per backtest.
STREAM_SIM = 8
#: The synthetic market's order flow, one lane per backtest.
STREAM_SYNTH = 9
#: The synthetic feature/reward process of step_synthetic, one lane per backtest.
STREAM_FEATURES = 10

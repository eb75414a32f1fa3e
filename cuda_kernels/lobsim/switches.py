"""Compile-time switches of the simulator step's optional features.

Every switch is True here: the registered kernels (and the CPU build) carry every feature and
choose at run time from the packed parameters, as each guard's second half does. The kernels
``LobSim`` launches are compiled again (alpharl.sim.variants) with the switches of the features
its SimParams leave off set False: Numba freezes a module global as a constant, so a False
switch takes its feature's branches, table loads, state traffic and registers out of the code
that runs, while the per-event path of the default model stays as short as it was before those
features existed. A switch may be False only where its guarded run-time test is false for every
launch of that build, so a specialized kernel computes exactly what the generic one does.
"""

#: The synthetic market (IP_SYNTHETIC): per-step tables, no row times.
SYNTHETIC = True
#: Feed latency in time (IP_FEED_DELAY): the agent sees the rows of ``seen_rows``.
FEED_DELAY = True
#: Entry latency in time (IP_TIMED_ENTRY): orders go live at ``live_rows``.
TIMED_ENTRY = True
#: Response latency (IP_RESP_DELAY): the own-state ring.
RESP_DELAY = True
#: queue_model "l3_fifo" (``arrived`` read at our price).
L3_FIFO = True
#: entry_queue "last_seen" (IP_ENTRY_QUEUE): sizes of prices out of view.
LAST_SEEN = True
#: SimParams.post_only (IP_POST_ONLY); an instruction's own flag is state and always read.
POST_ONLY = True
#: inventory_penalty_unit "sigma" (IP_PENALTY_UNIT): lambda x sigma.
SIGMA_PENALTY = True
#: inventory_penalty_quadratic > 0 (IP_PENALTY_QUADRATIC): lambda_2 x |q| / lot added to lambda.
QUADRATIC_PENALTY = True
#: SimParams.peg_quotes (IP_PEG): pegged join / improve orders follow the touch.
PEG = True
#: A fills log (IP_FILL_CAP > 0): the ring written at every fill.
FILLS_LOG = True
#: Order instructions: a step given ``orders`` (none: the zeros ``LobSim.no_orders``, a no-op).
INSTRUCTIONS = True

#: The switches in a fixed order (alpharl.sim.variants keys its builds by their values).
NAMES = ("SYNTHETIC", "FEED_DELAY", "TIMED_ENTRY", "RESP_DELAY", "L3_FIFO", "LAST_SEEN", "POST_ONLY", "SIGMA_PENALTY",
         "QUADRATIC_PENALTY", "PEG", "FILLS_LOG", "INSTRUCTIONS")

#: lobsim_step writes the observations of a block's backtests to shared memory, rows of
#: OBS_SHAPE = (threads, obs_dim), and the block stores them together, coalesced (a build for a
#: launch of one thread per backtest). Off: each thread stores its row of obs itself.
OBS_STAGED = False
OBS_SHAPE = (1, 1)

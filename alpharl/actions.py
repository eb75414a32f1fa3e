"""The agent's nine actions (SPEC §3.3): the one definition of their ids."""
from enum import IntEnum


class Action(IntEnum):
    HOLD = 0
    MARKET_BUY = 1
    MARKET_SELL = 2
    JOIN_BID = 3       # rest a buy at the best bid
    JOIN_ASK = 4       # rest a sell at the best ask
    IMPROVE_BID = 5    # rest a buy one tick above the best bid (if inside the spread)
    IMPROVE_ASK = 6    # rest a sell one tick below the best ask (if inside the spread)
    CANCEL = 7         # cancel all resting orders
    FLATTEN = 8        # cancel resting orders and close the position at market


# Plain ints for kernels (numba freezes module-level ints as constants).
HOLD = int(Action.HOLD)
MARKET_BUY = int(Action.MARKET_BUY)
MARKET_SELL = int(Action.MARKET_SELL)
JOIN_BID = int(Action.JOIN_BID)
JOIN_ASK = int(Action.JOIN_ASK)
IMPROVE_BID = int(Action.IMPROVE_BID)
IMPROVE_ASK = int(Action.IMPROVE_ASK)
CANCEL = int(Action.CANCEL)
FLATTEN = int(Action.FLATTEN)
#: Actions of the agent: the one definition (alpharl.sizes re-exports it with the network sizes).
N_ACTIONS = len(Action)

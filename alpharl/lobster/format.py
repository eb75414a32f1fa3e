"""LOBSTER file format facts: the one definition of columns, codes and sentinels.

Message row: time, type, order_id, size, price, direction. Orderbook row i is
the book AFTER message i: AskPrice1, AskSize1, BidPrice1, BidSize1, AskPrice2...
Prices are integers in units of 1e-4 dollars.
"""

#: Price unit: LOBSTER prices are dollars x PRICE_SCALE.
PRICE_SCALE = 10_000

# message columns
MSG_TIME, MSG_TYPE, MSG_ORDER_ID, MSG_SIZE, MSG_PRICE, MSG_DIRECTION = range(6)
MSG_COLUMNS = ("time", "type", "order_id", "size", "price", "direction")

# orderbook columns within one level (4 per level)
BOOK_COLS_PER_LEVEL = 4
ASK_PRICE, ASK_SIZE, BID_PRICE, BID_SIZE = range(BOOK_COLS_PER_LEVEL)

#: Padding of empty levels.
ASK_PAD_PRICE = 9_999_999_999
BID_PAD_PRICE = -9_999_999_999

# event types
EV_NEW = 1          # submission of a new limit order
EV_CANCEL = 2       # partial cancellation
EV_DELETE = 3       # full deletion
EV_EXEC = 4         # execution of a visible limit order
EV_HIDDEN_EXEC = 5  # execution of a hidden limit order (order id 0)
EV_HALT = 7         # trading halt indicator (price -1 halt, 0 resume quoting, 1 resume trading)
KNOWN_EVENT_TYPES = (EV_NEW, EV_CANCEL, EV_DELETE, EV_EXEC, EV_HIDDEN_EXEC, EV_HALT)

# direction: the side of the LIMIT order the message refers to
DIR_SELL = -1  # an execution of a sell limit order is a buyer-initiated trade
DIR_BUY = 1

#: Names of the event types, for reports.
EVENT_NAMES = {
    EV_NEW: "new limit order",
    EV_CANCEL: "partial cancellation",
    EV_DELETE: "deletion",
    EV_EXEC: "visible execution",
    EV_HIDDEN_EXEC: "hidden execution",
    EV_HALT: "trading halt",
}

#: Halt messages carry price -1 (halt), 0 (resume quoting) or 1 (resume trading).
HALT_PRICES = (-1, 0, 1)

# Column names of one orderbook level, in LOBSTER's order (AskPrice1, AskSize1, ...).
BOOK_FIELD_NAMES = ("AskPrice", "AskSize", "BidPrice", "BidSize")


def book_column_name(col: int) -> str:
    """LOBSTER's name of orderbook column ``col`` (0-based): 0 -> AskPrice1, 5 -> AskSize2."""
    return f"{BOOK_FIELD_NAMES[col % BOOK_COLS_PER_LEVEL]}{col // BOOK_COLS_PER_LEVEL + 1}"


#: LOBSTER's file names: <TICKER>_<DATE>_<start ms>_<end ms>_<message|orderbook>_<L>.csv
FILE_NAME_PATTERN = (r"(?P<ticker>.+)_(?P<date>\d{4}-\d{2}-\d{2})_(?P<start>\d+)_(?P<end>\d+)"
                     r"_(?P<kind>message|orderbook)_(?P<levels>\d+)\.csv")
MESSAGE, ORDERBOOK = "message", "orderbook"

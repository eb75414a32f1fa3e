"""The fills log: the device ring of fill records, drained to Arrow.

Each backtest writes its fills into its own ring of ``fills_log_capacity``
records (``fills_i`` / ``fills_f`` / ``fills_t``, alpharl.sim.layout FL_*) and counts them in
its ``fill_head``. ``drain_fills`` turns every record written since the last
drain into one Arrow table; ``FillsLog`` appends those tables to an Arrow IPC
stream file every time it is drained (call it every N steps, outside the hot
path: a drain syncs the stream). Records the ring overwrote before a drain
are counted in ``lost``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from alpharl.lobster.format import PRICE_SCALE
from alpharl.sim import layout as L

#: Columns of the fills log (one row per fill).
FILLS_SCHEMA = pa.schema([
    ("backtest", pa.int32()),
    ("step", pa.int32()),         # the backtest's step counter when it filled
    ("event_row", pa.int32()),    # cursor / event row of the snapshot or event it filled on
    ("order_id", pa.int32()),     # our order id (per backtest)
    ("side", pa.int8()),          # +1 buy, -1 sell
    ("price", pa.float64()),      # $
    ("price_ticks", pa.int32()),
    ("quantity", pa.int32()),     # shares
    ("maker", pa.bool_()),        # True: resting order (maker), False: taker
    ("fee", pa.float64()),        # $ (negative: rebate)
    ("queue_ahead", pa.int32()),  # queue ahead when the order went live (takers: 0)
    ("time_ns", pa.int64()),      # ns after midnight of event_row (LOBSTER's time); null: synthetic, no clock
    ("queue_at_fill", pa.int32()),  # queue ahead just before the event that filled it (takers: 0)
])


def drain_fills(sim, last_head: np.ndarray) -> tuple[pa.Table, np.ndarray, int]:
    """Fill records of ``sim`` (LobSim or ReferenceLobSim) written since ``last_head`` (int64[B]).

    Returns (table, new last_head, records lost to ring overwrite). A head below
    ``last_head`` means the simulator was reset: it counts from 0 again.
    """
    fi, ff, ft, head = sim.fills_snapshot()
    cap = sim.params.fills_log_capacity
    head = head.astype(np.int64)
    last = np.where(head < last_head, 0, last_head)
    if cap == 0:
        return FILLS_SCHEMA.empty_table(), head, 0
    first = np.maximum(last, head - cap)
    lost = int((first - last).sum())
    counts = head - first
    b = np.repeat(np.arange(head.size), counts)
    k = np.concatenate([np.arange(f, h) for f, h in zip(first, head)]) if b.size else np.zeros(0, np.int64)
    rec = fi[b, k % cap]
    tick_d = float(sim.tick) / PRICE_SCALE
    cols = {
        "backtest": b.astype(np.int32),
        "step": rec[:, L.FL_STEP],
        "event_row": rec[:, L.FL_ROW],
        "order_id": rec[:, L.FL_OID],
        "side": rec[:, L.FL_SIDE].astype(np.int8),
        "price": rec[:, L.FL_PRICE] * tick_d,
        "price_ticks": rec[:, L.FL_PRICE],
        "quantity": rec[:, L.FL_QTY],
        "maker": rec[:, L.FL_MAKER].astype(bool),
        "fee": ff[b, k % cap],
        "queue_ahead": rec[:, L.FL_QA0],
        "time_ns": ft[b, k % cap],
        "queue_at_fill": rec[:, L.FL_QA_FILL],
    }
    masks = {"time_ns": cols["time_ns"] == L.NO_TIME}   # null where the market has no clock
    table = pa.Table.from_pydict({n: pa.array(cols[n], type=FILLS_SCHEMA.field(n).type, mask=masks.get(n))
                                  for n in FILLS_SCHEMA.names}, schema=FILLS_SCHEMA)
    return table, head, lost


class FillsLog:
    """Appends a simulator's fills to an Arrow IPC stream file (readable by pyarrow, pandas,
    polars, DuckDB). ``drain()`` every N steps; ``close()`` at the end (also a context manager)."""

    def __init__(self, path, sim):
        if sim.params.fills_log_capacity == 0:
            raise ValueError("FillsLog: the simulator keeps no fills (SimParams.fills_log_capacity = 0)")
        self.sim = sim
        self.path = Path(path)
        self._sink = pa.OSFile(str(self.path), "wb")
        self._writer = pa.ipc.new_stream(self._sink, FILLS_SCHEMA)
        self._last = np.zeros(sim.B, np.int64)
        self.rows = 0
        self.lost = 0

    def drain(self) -> int:
        """Write every fill since the last drain; returns how many rows were written."""
        table, self._last, lost = drain_fills(self.sim, self._last)
        self.lost += lost
        if table.num_rows:
            self._writer.write_table(table)
            self._sink.flush()
        self.rows += table.num_rows
        return table.num_rows

    def close(self) -> None:
        self.drain()
        self._writer.close()
        self._sink.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_fills(path) -> pa.Table:
    """The whole fills log at ``path`` as one table."""
    with pa.OSFile(str(path), "rb") as f:
        return pa.ipc.open_stream(f).read_all()

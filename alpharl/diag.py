"""Arrow diagnostics: one row per diagnostic interval, every ISV slot by name.

Written as an Arrow IPC *stream* (``diagnostics.arrows``): each row batch is
serialised in memory and appended with a single ``write`` + ``fsync``, so a
kill at any moment leaves every earlier row readable (a stream needs no
footer). ``read_diagnostics`` returns a ``pyarrow.Table``; pandas
(``diag.to_pandas()``), polars (``pl.read_ipc_stream(path)``) and DuckDB
(``duckdb.sql("select * from diag")`` on the Arrow table held in a variable
``diag``, or ``read_parquet`` on the Parquet snapshot) read it.
A Parquet snapshot (``diagnostics.parquet``) is refreshed atomically at each
checkpoint and at the end of a run, for tools that prefer files with a footer.

Schema (documented in ``SCHEMA_DOC``): fixed columns first, then one float32
column per ISV slot named ``isv.<slot name>``, then free-form float64 metrics
from the trainer (losses, reward/PnL/trade statistics) named by prefix
(``losses/…``, ``pnl/…``, ``trades/…``).
"""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from alpharl import isv as S

DIAG_FILE = "diagnostics.arrows"
PARQUET_FILE = "diagnostics.parquet"
ISV_PREFIX = "isv."

FIXED_FIELDS = [
    pa.field("step", pa.int64()),
    pa.field("wall_time", pa.float64()),      # seconds since the run started
    pa.field("unix_time", pa.float64()),
    pa.field("steps_per_s", pa.float64()),    # training steps per second over the interval
    pa.field("env_steps_per_s", pa.float64()),  # steps x B per second
]

SCHEMA_DOC = {
    "step": "training step (env steps of all B backtests) at the end of the interval",
    "wall_time": "seconds since the run started",
    "unix_time": "seconds since the epoch",
    "steps_per_s": "training steps per second over the interval",
    "env_steps_per_s": "backtest steps per second over the interval (steps/s x B)",
    ISV_PREFIX + "<slot>": "the ISV slot's value at the end of the interval (see `alpharl slots`)",
    "<group>/<metric>": "trainer metrics (losses/..., pnl/..., trades/...), float64",
}


def isv_column(name: str) -> str:
    return ISV_PREFIX + name


def make_schema(metric_names: list[str]) -> pa.Schema:
    fields = list(FIXED_FIELDS)
    fields += [pa.field(isv_column(s.name), pa.float32()) for s in S.SLOTS]
    fields += [pa.field(m, pa.float64()) for m in metric_names]
    return pa.schema(fields, metadata={b"alpharl.format": b"diagnostics-v1"})


class DiagnosticsWriter:
    """Appends rows to ``run_dir/diagnostics.arrows``; every row is durable once ``write`` returns."""

    def __init__(self, run_dir: Path, metric_names: list[str], append: bool = False):
        self.path = Path(run_dir) / DIAG_FILE
        self.metric_names = list(metric_names)
        self.schema = make_schema(self.metric_names)
        exists = self.path.exists() and self.path.stat().st_size > 0
        if append and exists:
            old = read_diagnostics(self.path)
            if old.schema.remove_metadata() != self.schema.remove_metadata():
                raise ValueError(f"{self.path}: existing diagnostics have another schema; cannot append")
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            self._trim_to_complete(old)
        else:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self._append(self._schema_bytes())

    def _schema_bytes(self) -> bytes:
        sink = io.BytesIO()
        with ipc.new_stream(sink, self.schema):
            pass  # writes the schema message and an end-of-stream marker
        data = sink.getvalue()
        return data[: -len(_EOS)] if data.endswith(_EOS) else data

    def _trim_to_complete(self, table: pa.Table) -> None:
        """Resume: drop a torn tail left by a crash so appended rows stay readable."""
        complete = len(self._schema_bytes()) + sum(len(_batch_bytes(self.schema, b)) for b in table.to_batches())
        os.ftruncate(self._fd, complete)

    def _append(self, data: bytes) -> None:
        os.write(self._fd, data)
        os.fsync(self._fd)

    def write(self, step: int, wall_time: float, unix_time: float, steps_per_s: float, env_steps_per_s: float,
              isv_host: np.ndarray, metrics: dict[str, float]) -> None:
        cols = [[step], [wall_time], [unix_time], [steps_per_s], [env_steps_per_s]]
        cols += [[np.float32(isv_host[s.index])] for s in S.SLOTS]
        cols += [[float(metrics.get(m, np.nan))] for m in self.metric_names]
        batch = pa.record_batch([pa.array(c, type=f.type) for c, f in zip(cols, self.schema)], schema=self.schema)
        self._append(_batch_bytes(self.schema, batch))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"


def _batch_bytes(schema: pa.Schema, batch: pa.RecordBatch) -> bytes:
    """One record-batch message in stream encoding (without schema or end marker)."""
    return batch.serialize().to_pybytes()


def read_diagnostics(path: Path | str) -> pa.Table:
    """Read a diagnostics stream; a torn final message (kill mid-write) is dropped."""
    path = Path(path)
    if path.is_dir():
        path = path / DIAG_FILE
    with open(path, "rb") as f:
        data = f.read()
    reader = ipc.open_stream(pa.py_buffer(data))
    batches = []
    while True:
        try:
            batches.append(reader.read_next_batch())
        except StopIteration:
            break
        except (pa.ArrowInvalid, OSError):
            break  # torn tail
    return pa.Table.from_batches(batches, schema=reader.schema)


def write_parquet_snapshot(run_dir: Path) -> Path:
    """Refresh ``diagnostics.parquet`` atomically from the stream."""
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    table = read_diagnostics(run_dir / DIAG_FILE)
    out = run_dir / PARQUET_FILE
    tmp = out.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, out)
    return out

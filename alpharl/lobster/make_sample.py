"""Cut the embedded sample: the first N events of a LOBSTER pair, zipped with LOBSTER's naming.

    python -m alpharl.lobster.make_sample LOBSTER_SampleFile_AMZN_2012-06-21_5.zip data/ --rows 30000

The cut keeps rows 1..N of both files byte for byte; the end time in the new
file names is the last kept event's time in ms (rounded up), as LOBSTER names
files by their time span. Members carry the source members' timestamps, so the
same source and N give the same zip, byte for byte (with the same zlib).
"""
from __future__ import annotations

import argparse
import hashlib
import io
import math
import time
import zipfile
from pathlib import Path

from alpharl.lobster.load import load_lobster
from alpharl.lobster.sample import SAMPLE_NAME
from alpharl.lobster.source import resolve

#: Events in the shipped sample (the zip stays under 1 MB).
SAMPLE_ROWS = 30_000
_MS = 1000


def first_rows(data: bytes, rows: int) -> bytes:
    """The first ``rows`` lines of ``data``, newline included."""
    end = -1
    for _ in range(rows):
        end = data.index(b"\n", end + 1)
    return data[:end + 1]


def cut(source: Path, out_dir: Path, rows: int = SAMPLE_ROWS, name: str = SAMPLE_NAME) -> Path:
    """Write the first ``rows`` events of the pair in ``source`` as ``out_dir/name``; returns its path."""
    pair = resolve(Path(source))
    message, orderbook = first_rows(pair.read(pair.message), rows), first_rows(pair.read(pair.orderbook), rows)
    last_time = float(message.rstrip(b"\n").rsplit(b"\n", 1)[-1].split(b",", 1)[0])
    n = pair.name
    end_ms = math.ceil(last_time * _MS)
    base = f"{n.ticker}_{n.date}_{n.start_ms}_{end_ms}"
    out = Path(out_dir) / name
    out.parent.mkdir(parents=True, exist_ok=True)
    stamps = _member_times(pair)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for member, kind, data in ((pair.message, "message", message), (pair.orderbook, "orderbook", orderbook)):
            info = zipfile.ZipInfo(f"{base}_{kind}_{n.levels}.csv", date_time=stamps[member])
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data, compresslevel=9)
    out.write_bytes(buffer.getvalue())
    return out


def _member_times(pair) -> dict[str, tuple]:
    """Timestamps for the new members: the source members' (or files') times, to the second."""
    if pair.archive:
        with zipfile.ZipFile(pair.archive) as src:
            return {m: src.getinfo(m).date_time for m in (pair.message, pair.orderbook)}
    return {m: time.localtime(int(Path(m).stat().st_mtime))[:6] for m in (pair.message, pair.orderbook)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a LOBSTER zip or message CSV")
    parser.add_argument("out_dir", type=Path, help="folder to write the sample zip into")
    parser.add_argument("--rows", type=int, default=SAMPLE_ROWS, help="events to keep")
    parser.add_argument("--name", default=SAMPLE_NAME, help="file name of the sample zip")
    args = parser.parse_args(argv)
    out = cut(args.source, args.out_dir, args.rows, args.name)
    md = load_lobster(out, cache=False)  # the cut must pass the same validation
    for path in (args.source, out):
        print(f"{path}: {path.stat().st_size} bytes, sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}")
    print(f"{md.n_events} events, {md.levels} levels, {md.time[0]:.3f}-{md.time[-1]:.3f} s")


if __name__ == "__main__":
    main()

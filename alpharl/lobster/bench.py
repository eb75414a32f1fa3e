"""Loading benchmark: CSV parse + validation, cache write, cache hit, and the one-time upload to the device.

    python -m alpharl.lobster.bench [PATH ...] [--repeat 3] [--device]

PATH defaults to the embedded sample. One JSON line per source, times in
seconds (best of ``--repeat``). ``--device`` also times copying every array
of MarketData to the device with numba.cuda (the simulator's copy when there
is no GPU), which is what the simulator does once before training.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from alpharl.lobster.load import load_lobster
from alpharl.lobster.market import FIELD_DTYPES, MarketData
from alpharl.lobster.sample import embedded_sample_path


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def upload(md: MarketData) -> dict:
    """Every array of ``md`` on the device (what a replaying simulator holds)."""
    from numba import cuda

    arrays = {name: cuda.to_device(getattr(md, name)) for name in FIELD_DTYPES}
    cuda.synchronize()
    return arrays


def bench(path: Path, repeat: int, device: bool) -> dict:
    parse_s, md = _best(lambda: load_lobster(path, cache=False), repeat)
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        load_lobster(path, cache=folder)
        write_s = time.perf_counter() - t0
        hit_s, _ = _best(lambda: load_lobster(path, cache=folder), repeat)
    result = {"source": str(path), "events": md.n_events, "levels": md.levels,
              "bytes": int(sum(getattr(md, name).nbytes for name in FIELD_DTYPES)),
              "parse_validate_s": round(parse_s, 4), "parse_and_cache_write_s": round(write_s, 4),
              "cache_hit_s": round(hit_s, 4)}
    if device:
        upload(md)  # first call pays the context creation
        result["upload_s"] = round(_best(lambda: upload(md), repeat)[0], 4)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="LOBSTER sources (default: the embedded sample)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is kept")
    parser.add_argument("--device", action="store_true", help="also time the upload to the device")
    args = parser.parse_args(argv)
    for path in args.paths or [embedded_sample_path()]:
        print(json.dumps(bench(path, args.repeat, args.device)), flush=True)


if __name__ == "__main__":
    main()

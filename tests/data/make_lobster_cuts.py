"""Cut the LOBSTER samples the tests read when the whole files are not beside the repository.

    python tests/data/make_lobster_cuts.py <folder holding the LOBSTER_SampleFile_*.zip>

Each cut keeps the first CUT_EVENTS events of one sample, byte for byte, zipped the
way the embedded sample is (alpharl.lobster.make_sample), so the same sources give
the same zips; it prints each source's and cut's sha256 (kept in tests/data/README.md).
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from alpharl.lobster.load import load_lobster
from alpharl.lobster.make_sample import cut

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as pytest puts it on the path
from support import CUT_EVENTS, REAL_SAMPLES, cut_path  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("samples", type=Path, help="folder holding the LOBSTER_SampleFile_*.zip")
    args = parser.parse_args(argv)
    for name, (levels, _) in REAL_SAMPLES.items():
        source, target = args.samples / name, cut_path(name)
        out = cut(source, target.parent, CUT_EVENTS, target.name)
        md = load_lobster(out, cache=False)  # the cut passes the loader's validation
        assert (md.n_events, md.levels) == (CUT_EVENTS, levels), out
        for path in (source, out):
            print(f"{path.name}: {path.stat().st_size} bytes, sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()

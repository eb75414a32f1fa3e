"""The CSV text reaches Arrow in memory Arrow owns; a replayed episode is fitted to data shorter than it."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from alpharl.lobster import csvread
from alpharl.lobster.errors import LobsterFormatError
from alpharl.lobster.sample import load_embedded
from alpharl.lobster.validate import infer_tick
from alpharl.sim.market import fit_episode
from alpharl.sim.params import SimParams


def test_csv_reader_gets_a_copy_arrow_owns(monkeypatch):
    """Arrow's reader threads may free their input after read_csv returns; freeing a view of a
    Python object then takes the GIL, which aborts the process when that happens at exit."""
    data = b"1,2\n3,4\n"
    seen = []
    real = pcsv.read_csv

    def spy(source, **kw):
        seen.append(source)
        return real(source, **kw)

    monkeypatch.setattr(csvread.pcsv, "read_csv", spy)
    cols = csvread.read_columns(data, "f.csv", ["a", "b"], [pa.int64(), pa.int64()])
    assert [c.tolist() for c in cols] == [[1, 3], [2, 4]]
    (buf,) = seen
    python_address = np.frombuffer(data, np.uint8).ctypes.data
    assert isinstance(buf, pa.Buffer) and buf.address != python_address


def test_tick_survives_a_damaged_price():
    book = np.array(load_embedded(cache=False).book[:2000])
    book[700, 0] += 37
    assert infer_tick(book) == 100
    finer = book.copy()
    finer[:, 0::2] += np.arange(len(book))[:, None] % 7  # every price moved off the cent grid
    assert infer_tick(finer) < 100


def test_long_enough_data_keeps_the_episode():
    md = load_embedded(cache=False)
    params = SimParams()
    assert params.window_events < md.n_events
    assert fit_episode(params, md) == (params, None) and fit_episode(params, md)[0] is params


def test_short_data_fits_the_episode_with_a_notice():
    md = load_embedded(cache=False).window(0, 672)
    fitted, notice = fit_episode(SimParams(), md)
    assert fitted.episode_steps == 671 // 16 and fitted.window_events < 672
    assert fitted.events_per_step == 16 and "\n" not in notice
    assert "episode shortened to 41 steps" in notice and "672 events" in notice and "episode_steps" in notice


def test_data_too_short_for_one_step_is_one_line():
    md = load_embedded(cache=False).window(0, 16)
    with pytest.raises(LobsterFormatError, match="16 events: too few for one step"):
        fit_episode(SimParams(), md)

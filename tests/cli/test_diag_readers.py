"""The diagnostics file as other tools read it: pyarrow, pandas, polars, DuckDB; Parquet snapshot."""
import numpy as np
import pytest

from alpharl import isv as S
from alpharl.diag import SCHEMA_DOC, read_diagnostics, write_parquet_snapshot
from alpharl.rundir import DIAG_FILE
from cli_helpers import METRICS, make_run


def test_pandas_polars_duckdb_read_it(tmp_path, rng):
    run = make_run(tmp_path / "run", rows=5, rng=rng)
    diag = read_diagnostics(run)
    assert diag.num_rows == 5
    assert diag.column_names[:5] == ["step", "wall_time", "unix_time", "steps_per_s", "env_steps_per_s"]
    assert {f"isv.{s.name}" for s in S.SLOTS} <= set(diag.column_names)
    assert set(METRICS) <= set(diag.column_names)

    df = diag.to_pandas()
    assert list(df["step"]) == [10, 20, 30, 40, 50]

    pl = pytest.importorskip("polars")  # test extra; absent on some GPU images

    pf = pl.read_ipc_stream(run / DIAG_FILE)
    assert pf.height == 5 and pf["isv.lr_q"].to_list() == df["isv.lr_q"].tolist()

    duckdb = pytest.importorskip("duckdb")

    got = duckdb.sql('select max("pnl/total") as m, count(*) as n from diag').fetchall()
    assert got == [(50.0, 5)]
    parquet = write_parquet_snapshot(run)
    assert duckdb.sql(f"select count(*) from read_parquet('{parquet}')").fetchall() == [(5,)]
    assert np.isclose(duckdb.sql(f'select "isv.loss_q" from read_parquet(\'{parquet}\') order by step limit 1')
                      .fetchall()[0][0], 3.0)


def test_schema_is_documented():
    assert {"step", "wall_time", "steps_per_s", "env_steps_per_s"} <= set(SCHEMA_DOC)

"""Datasets: which files --data finds (file, folder, glob, repeated), their identity by content, labels,
held-out files, training rows and the record, and every refusal in one line."""
import shutil
import zipfile

import pytest

from alpharl import dataset as D
from alpharl.lobster.load import load_lobster
from alpharl.lobster.sample import embedded_sample_path
from support import AMZN5, GOOG1, GOOG5, cut_path

AMZN5_CUT, GOOG5_CUT, GOOG1_CUT = cut_path(AMZN5), cut_path(GOOG5), cut_path(GOOG1)


@pytest.fixture
def folder(tmp_path):
    """Two zips and one CSV pair (GOOG level 1, unzipped), plus a file that is no LOBSTER source."""
    d = tmp_path / "days"
    d.mkdir()
    shutil.copy(AMZN5_CUT, d)
    shutil.copy(GOOG5_CUT, d)
    with zipfile.ZipFile(GOOG1_CUT) as z:
        z.extractall(d)
    (d / "notes.txt").write_text("not data")
    return d


def test_find_sources_folder_glob_repeated(folder):
    found = D.find_sources([str(folder)])
    names = [p.name for p in found]
    # the CSV pair once (by its message file), zips, sorted; notes.txt ignored
    assert names == ["AMZN_2012-06-21_5_cut.zip", "GOOG_2012-06-21_34200000_34694980_message_1.csv",
                     "GOOG_2012-06-21_5_cut.zip"]
    assert [p.name for p in D.find_sources([str(folder / "GOOG*orderbook*")])] == [names[1]]
    assert [p.name for p in D.find_sources([str(folder / "*.zip")])] == [names[0], names[2]]
    # repeated entries keep their order, a file named twice counts once
    again = D.find_sources([str(folder / "GOOG_2012-06-21_5_cut.zip"), str(folder), str(folder / "*.zip")])
    assert [p.name for p in again] == [names[2], names[0], names[1]]
    assert D.find_sources([]) == [embedded_sample_path()]
    assert D.find_sources([str(tmp := folder.parent / "**" / "AMZN*.zip")])[0].name == names[0], tmp


@pytest.mark.parametrize("spec,words", [("missing.zip", "no such file"), ("nothing/*.zip", "matches no LOBSTER"),
                                        ("EMPTY", "no LOBSTER file")])
def test_find_sources_refuses(tmp_path, spec, words):
    (tmp_path / "EMPTY").mkdir()
    (tmp_path / "nothing").mkdir()
    (tmp_path / "nothing" / "x.txt").write_text("")
    with pytest.raises(D.DatasetError, match=words) as e:
        D.find_sources([str(tmp_path / spec)])
    assert str(e.value).startswith("--data ") and "\n" not in str(e.value)


def test_identity_is_the_content(folder, tmp_path):
    """The same data as a zip and as a CSV pair is one file; another window of it is not."""
    pair = load_lobster(folder / "GOOG_2012-06-21_34200000_34694980_message_1.csv", cache=False)
    zipped = load_lobster(GOOG1_CUT, cache=False)
    assert D.content_sha256(pair) == D.content_sha256(zipped)
    assert D.content_sha256(zipped.window(0, 2999)) != D.content_sha256(zipped)
    assert D.content_sha256(zipped.with_levels(1)) == D.content_sha256(zipped)
    amzn = load_lobster(AMZN5_CUT, cache=False)
    assert D.content_sha256(amzn.with_levels(1)) != D.content_sha256(amzn)
    assert D.file_labels([amzn, zipped, amzn]) == ["AMZN_2012-06-21_5", "GOOG_2012-06-21_1", "AMZN_2012-06-21_5#2"]


def test_build_rows_holdout_and_record(folder):
    ds = D.load_dataset([str(folder / "*.zip")], "0.1:0.6", "GOOG*", b=3, events_per_step=16)
    assert [f.label for f in ds.files] == ["AMZN_2012-06-21_5", "GOOG_2012-06-21_5"]
    amzn, goog = ds.files
    assert amzn.train_rows == (300, 1800) and goog.held_out and ds.training == [amzn]
    assert ds.train_markets()[0].n_events == 1500
    assert ds.train_markets()[0].time[0] == amzn.market.time[300]
    rec = ds.record(3)
    assert rec["train_window"] == "0.1:0.6" and rec["holdout_files"] == "GOOG*" and rec["streams"] == 1
    assert rec["files"][0] | {"sha256": None} == {
        "label": "AMZN_2012-06-21_5", "path": str(folder / "AMZN_2012-06-21_5_cut.zip"), "sha256": None,
        "events": 3000, "levels": 5, "tick": 100, "held_out": False, "train_rows": [300, 1800], "stream": 0,
        "backtests": 3}
    assert rec["files"][1]["train_rows"] is None and rec["files"][1]["backtests"] == 0
    # round robin over two streams: 5 backtests -> 3 and 2
    rec = D.load_dataset([str(folder / "*.zip")], "0:0.8", None, b=5, events_per_step=16).record(5)
    assert [f["backtests"] for f in rec["files"]] == [3, 2] and [f["stream"] for f in rec["files"]] == [0, 1]


@pytest.mark.parametrize("window,holdout,b,words", [
    ("0:0.001", None, 2, "too few for one step"),
    ("0:0.8", "nothing*", 2, "matches no file"),
    ("0:0.8", "*", 2, "holds out every file"),
    ("0:0.8", None, 1, "fewer backtests than the 2 training files"),
])
def test_dataset_refusals(folder, window, holdout, b, words):
    with pytest.raises(D.DatasetError, match=words) as e:
        D.load_dataset([str(folder / "*.zip")], window, holdout, b=b, events_per_step=16)
    assert "\n" not in str(e.value)


def test_same_files_on_resume(folder):
    ds = D.load_dataset([str(folder / "*.zip")], "0:0.8", None, b=2, events_per_step=16)
    rec = ds.record(2)
    D.check_same_files(ds, rec, "--resume R")
    changed = {**rec, "files": [dict(rec["files"][0], sha256="0" * 64), rec["files"][1]]}
    with pytest.raises(D.DatasetError, match="changed since it started: AMZN_2012-06-21_5"):
        D.check_same_files(ds, changed, "--resume R")
    with pytest.raises(D.DatasetError, match="GOOG_2012-06-21_5 .* is new"):
        D.check_same_files(ds, {**rec, "files": rec["files"][:1]}, "--resume R")
    with pytest.raises(D.DatasetError, match="3 files recorded, 2 found"):
        D.check_same_files(ds, {**rec, "files": rec["files"] + rec["files"][:1]}, "--resume R")


def test_config_keeps_several_data_entries_and_the_windows(tmp_path):
    from alpharl.config import ConfigError, TrainConfig

    cfg = TrainConfig(data=["a.zip", "days/*.zip"], train_window="0.1:0.9", holdout_files="GOOG*")
    path = tmp_path / "c.toml"
    path.write_text(cfg.to_toml())
    back = TrainConfig.from_toml(path)
    assert (back.data, back.train_window, back.holdout_files) == (["a.zip", "days/*.zip"], "0.1:0.9", "GOOG*")
    path.write_text("data = [1, 2]\n")
    with pytest.raises(ConfigError, match="data = \\[1, 2\\]: expected a string or a list of strings"):
        TrainConfig.from_toml(path)
    with pytest.raises(ConfigError, match="--train-window"):
        TrainConfig(train_window="0.5").validate()

"""Windows of an event stream: parsing, rows, overlap and the held-out complement."""
import pytest

from alpharl import windows as W


@pytest.mark.parametrize("text,want", [("0:0.8", (0.0, 0.8)), ("0.25:1", (0.25, 1.0)), (" 0 : 1 ", (0.0, 1.0))])
def test_parse(text, want):
    assert W.parse_window(text) == want


@pytest.mark.parametrize("text", ["0.8", "0:0.5:1", "a:b", "", "0.8:0.2", "0.5:0.5", "-0.1:0.5", "0:1.5",
                                  "nan:1", "0:inf"])
def test_parse_refuses(text):
    with pytest.raises(W.WindowError, match="--train-window"):
        W.parse_window(text)
    with pytest.raises(W.WindowError, match="--window"):
        W.parse_window(text, "--window")


def test_rows_overlap_and_format():
    assert W.rows(3000, (0.0, 0.8)) == (0, 2400) and W.rows(3000, (0.8, 1.0)) == (2400, 3000)
    assert W.rows(30_000, W.parse_window("0.8:1")) == (24_000, 30_000)
    assert not W.overlap((0, 2400), (2400, 3000)) and W.overlap((0, 2400), (2399, 3000))
    assert not W.overlap(None, (0, 10)) and not W.overlap((5, 5), (0, 10))
    assert W.format_window((0.0, 0.8)) == "0:0.8" and W.format_window((0.1234567891, 1.0)) == "0.1234567891:1"
    # windows that share no fraction share no row, at any length
    for n in (7, 1000, 155_935):
        assert not W.overlap(W.rows(n, (0.0, 0.37)), W.rows(n, (0.37, 1.0)))


def test_held_out_complement():
    assert W.held_out((0.0, 0.8)) == (0.8, 1.0)
    assert W.held_out((0.2, 1.0)) == (0.0, 0.2)
    assert W.held_out((0.3, 0.6)) == (0.6, 1.0)       # the larger part: after (0.4) beats before (0.3)
    assert W.held_out((0.5, 0.75)) == (0.0, 0.5)
    assert W.held_out((0.25, 0.75)) == (0.75, 1.0)    # a tie: the later part (a forward test)
    assert W.held_out((0.0, 1.0)) is None

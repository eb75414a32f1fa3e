"""Every bad-data case ends in one LobsterFormatError line naming the file and the 1-based row."""
import zipfile

import pytest

from alpharl.lobster.errors import LobsterFormatError
from alpharl.lobster.format import ASK_PAD_PRICE, BID_PAD_PRICE
from alpharl.lobster.load import load_lobster


def load_error(path, **kw) -> str:
    with pytest.raises(LobsterFormatError) as info:
        load_lobster(path, cache=False, **kw)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message
    return message


def assert_names(message: str, file: str, row: int | None = None, column: str | None = None):
    assert file in message, message
    if row is not None:
        assert f"row {row}:" in message or f"row {row} column" in message, message
    if column is not None:
        assert f"column {column}" in message, message


#: One edited cell -> (file, 1-based row, column, words of the message).
CELL_CASES = {
    # id: (file, 0-based row, 0-based column, new cell, column named, words expected)
    "unknown event type": ("message", 7, 1, "6", "2 (type)", "unknown event type 6 (known: 1, 2, 3, 4, 5, 7)"),
    "bad direction": ("message", 9, 5, "0", "6 (direction)", "direction 0 is not -1 (sell) or 1 (buy)"),
    "word for a size": ("message", 30, 3, "abc", "4 (size)", "'abc' is not an integer"),
    "decimal size": ("message", 30, 3, "12.5", "4 (size)", "'12.5' is not an integer"),
    "exponent size": ("message", 30, 3, "1e3", "4 (size)", "'1e3' is not an integer"),
    "N/A size": ("message", 30, 3, "N/A", "4 (size)", "'N/A' is not an integer"),
    "clock time": ("message", 2, 0, "09:30:00", "1 (time)", "'09:30:00' is not a number"),
    "nan time": ("message", 13, 0, "nan", "1 (time)", "time nan is not a time of day"),
    "empty field": ("message", 5, 2, "", "3 (order_id)", "empty field"),
    "negative order id": ("message", 4, 2, "-5", "3 (order_id)", "order id -5 is negative"),
    "zero size": ("message", 8, 3, "0", "4 (size)", "size 0 is not in 1..2147483647"),
    "size beyond int32": ("message", 8, 3, "2147483648", "4 (size)", "size 2147483648 is not in 1.."),
    "zero price": ("message", 11, 4, "0", "5 (price)", "price 0 is not a price"),
    "word in the book": ("orderbook", 12, 9, "x", "10 (AskSize3)", "'x' is not an integer"),
    "ask holds the bid padding": ("orderbook", 14, 12, str(BID_PAD_PRICE), "13 (AskPrice4)",
                                  f"{BID_PAD_PRICE} is neither a price nor the ask padding {ASK_PAD_PRICE}"),
    "price level of size 0": ("orderbook", 26, 1, "0", "2 (AskSize1)", "ask level 1 at price"),
}


@pytest.mark.parametrize("case", CELL_CASES)
def test_bad_cell(small_pair, tmp_path, case):
    file, row, col, cell, column, words = CELL_CASES[case]
    (small_pair.msg if file == "message" else small_pair.book)[row][col] = cell
    message = load_error(small_pair.write(tmp_path))
    name = small_pair.message_name if file == "message" else small_pair.orderbook_name
    assert_names(message, name, row + 1, column)
    assert words in message, message


def test_unequal_row_counts(small_pair, tmp_path):
    n = len(small_pair.book)
    small_pair.book.pop()
    message = load_error(small_pair.write(tmp_path))
    assert_names(message, small_pair.orderbook_name, n)
    assert f"missing (this file has {n - 1} rows, {small_pair.message_name} has {n})" in message


def test_message_file_shorter(small_pair, tmp_path):
    n = len(small_pair.msg)
    small_pair.msg.pop()
    assert_names(load_error(small_pair.write(tmp_path)), small_pair.message_name, n)


def test_time_decreasing(small_pair, tmp_path):
    small_pair.msg[16][0] = f"{float(small_pair.msg[15][0]) - 0.5:.9f}"
    message = load_error(small_pair.write(tmp_path))
    assert_names(message, small_pair.message_name, 17, "1 (time)")
    assert "is before the previous row's 34200" in message and "np." not in message


def test_crossed_book(small_pair, tmp_path):
    ask = int(small_pair.book[24][0])
    small_pair.book[24][2] = str(ask + 100)  # best bid above best ask
    message = load_error(small_pair.write(tmp_path))
    assert_names(message, small_pair.orderbook_name, 25)
    assert f"book crossed (bid {ask + 100} >= ask {ask})" in message


def test_locked_book_is_crossed_too(small_pair, tmp_path):
    small_pair.book[3][2] = small_pair.book[3][0]
    assert "book crossed" in load_error(small_pair.write(tmp_path))


def test_empty_line_inside_the_file(small_pair, tmp_path):
    small_pair.book.insert(10, [""])
    small_pair.book.pop()
    message = load_error(small_pair.write(tmp_path))
    assert_names(message, small_pair.orderbook_name, 11)
    assert "empty line" in message


def test_trailing_blank_lines_are_not_rows(small_pair, tmp_path):
    text = "".join(",".join(r) + "\n" for r in small_pair.msg) + "\n\n"
    assert load_lobster(small_pair.write(tmp_path, msg_text=text), cache=False).n_events == len(small_pair.msg)


def test_wrong_column_count_in_a_row(small_pair, tmp_path):
    small_pair.msg[21].append("0")
    message = load_error(small_pair.write(tmp_path))
    assert_names(message, small_pair.message_name, 22)
    assert "7 columns, expected 6" in message


def test_orderbook_width_disagrees_with_the_level_count_in_the_name(small_pair, tmp_path):
    small_pair.book = [row[:16] for row in small_pair.book]  # 4 levels in a file named _5
    message = load_error(small_pair.write(tmp_path))
    assert_names(message, small_pair.orderbook_name, 1)
    assert "16 columns, expected 20 (5 levels in the file name)" in message


def test_padded_level_with_nonzero_size(small_pair, tmp_path):
    small_pair.book[18][4 * 4 + 2:] = [str(BID_PAD_PRICE), "7"]  # BidPrice5 padded, BidSize5 = 7
    message = load_error(small_pair.write(tmp_path))
    assert_names(message, small_pair.orderbook_name, 19, "20 (BidSize5)")
    assert "padding size is 0" in message


def test_padding_above_an_occupied_level(small_pair, tmp_path):
    small_pair.book[4][4:6] = [str(ASK_PAD_PRICE), "0"]  # ask level 2 empty, level 3 occupied
    message = load_error(small_pair.write(tmp_path))
    assert_names(message, small_pair.orderbook_name, 5, "9 (AskPrice3)")
    assert "ask level 2 is empty but level 3 is not" in message


def test_levels_out_of_order(small_pair, tmp_path):
    small_pair.book[6][6] = str(int(small_pair.book[6][2]) + 100)  # BidPrice2 above BidPrice1
    message = load_error(small_pair.write(tmp_path))
    assert_names(message, small_pair.orderbook_name, 7, "7 (BidPrice2)")
    assert "is not below level 1's" in message


def test_earliest_bad_row_is_reported(small_pair, tmp_path):
    small_pair.msg[33][1] = "9"
    small_pair.book[11][1] = "0"
    assert_names(load_error(small_pair.write(tmp_path)), small_pair.orderbook_name, 12)


def test_missing_orderbook_file(small_pair, tmp_path):
    message_path = small_pair.write(tmp_path)
    (tmp_path / small_pair.orderbook_name).unlink()
    message = load_error(message_path)
    assert_names(message, small_pair.orderbook_name)
    assert "no such file" in message


def test_missing_orderbook_member_in_zip(small_pair, tmp_path):
    archive = small_pair.zip(tmp_path / "pair.zip", members=("message",))
    message = load_error(archive)
    assert_names(message, f"pair.zip:{small_pair.orderbook_name}")
    assert "no such file in the zip" in message


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.zip"
    message = load_error(missing)
    assert message == f"{missing}: no such file or directory"


@pytest.mark.parametrize("which", ["message", "orderbook"])
def test_empty_file(small_pair, tmp_path, which):
    path = small_pair.write(tmp_path, **{f"{'msg' if which == 'message' else 'book'}_text": ""})
    message = load_error(path)
    name = small_pair.message_name if which == "message" else small_pair.orderbook_name
    assert_names(message, name)
    assert message.endswith("file is empty")


def test_file_name_not_lobster(tmp_path):
    odd = tmp_path / "prices.csv"
    odd.write_text("1,2\n")
    assert "not a LOBSTER file name" in load_error(odd)


def test_not_a_zip(tmp_path):
    fake = tmp_path / "fake.zip"
    fake.write_text("hello")
    assert_names(load_error(fake), "fake.zip")


def test_zip_errors_name_the_archive_and_member(small_pair, tmp_path):
    small_pair.msg[3][1] = "8"
    archive = small_pair.zip(tmp_path / "bad.zip")
    assert_names(load_error(archive), f"bad.zip:{small_pair.message_name}", 4, "2 (type)")


def test_nothing_usable_in_a_directory(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    assert "no LOBSTER pair" in load_error(tmp_path)


def test_zip_without_lobster_files(tmp_path):
    archive = tmp_path / "other.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("readme.txt", "x")
    assert "no LOBSTER message file" in load_error(archive)


def test_unreadable_source_is_one_line(small_pair, tmp_path, monkeypatch):
    message_path = small_pair.write(tmp_path)

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(message_path))

    monkeypatch.setattr("alpharl.lobster.cache.open", denied, raising=False)
    with pytest.raises(LobsterFormatError) as info:
        load_lobster(message_path)  # the cache key hashes the files first
    assert str(info.value) == f"{message_path}: cannot read (Permission denied)"

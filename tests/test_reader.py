"""The task-side reader: exact line numbers, line ends, and every bad-input case counted."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from l4spark.parse.layout import Issue, RankFile
from l4spark.parse.reader import ReadLimits, read_lines


def rank_file(path: Path) -> RankFile:
    return RankFile("job", "node", 0, str(path), path.name, path.stat().st_size)


def read_all(path: Path, **limits) -> tuple[list[tuple[int, str]], list[Issue]]:
    lines, issues = [], []
    for item in read_lines(rank_file(path), ReadLimits(**limits)):
        if isinstance(item, Issue):
            issues.append(item)
        else:
            first, block, _ = item
            lines += [(first + i, text) for i, text in enumerate(block) if text is not None]
    return lines, issues


def test_line_ends_lf_crlf_and_lone_cr(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"one\r\ntwo\rthree\n\nfive")
    lines, issues = read_all(path)
    assert lines == [(1, "one"), (2, "two"), (3, "three"), (4, ""), (5, "five")]
    assert issues == []


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64])
def test_line_numbers_exact_across_chunk_boundaries(tmp_path, chunk):
    path = tmp_path / "a.log"
    text = "".join(f"line {i}\r\n" if i % 3 else f"line {i}\n" for i in range(1, 60))
    path.write_bytes(text.encode())
    lines, _ = read_all(path, chunk_bytes=chunk)
    assert lines == [(i, f"line {i}") for i in range(1, 60)]


def test_invalid_utf8_is_kept_repaired_and_counted(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"ok\n\xff\xfe caf\xe9 au lait at 21 degrees\nok again\n")
    lines, issues = read_all(path)
    assert lines == [(1, "ok"), (2, "\ufffd\ufffd caf\ufffd au lait at 21 degrees"), (3, "ok again")]
    assert [(i.reason, i.n_lines, i.line_no) for i in issues] == [("invalid_utf8", 1, 2)]


def test_binary_lines_are_set_aside_with_numbers_kept(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"first\n\x00\x01\x02garbage\x00\n\x03\x04\x05\x06\x07\x08ab\nlast\n")
    lines, issues = read_all(path)
    assert lines == [(1, "first"), (4, "last")]
    assert [(i.reason, i.n_lines, i.line_no) for i in issues] == [("binary_line", 2, 2)]


def test_control_markers_in_a_text_line_are_neutralised(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"a long enough text line with one \x01 marker inside\n")
    lines, issues = read_all(path)
    assert lines == [(1, "a long enough text line with one \ufffd marker inside")]
    assert issues == []


@pytest.mark.parametrize("chunk", [1 << 10, 1 << 20])
def test_giant_line_is_set_aside_in_bounded_memory(tmp_path, chunk):
    path = tmp_path / "a.log"
    with open(path, "wb") as handle:
        handle.write(b"before\n")
        handle.write(b"x" * (5 * 1024 * 1024) + b"\n")
        handle.write(b"after\n")
    lines, issues = read_all(path, max_line_bytes=64 * 1024, chunk_bytes=chunk)
    assert lines == [(1, "before"), (3, "after")]
    assert [(i.reason, i.n_lines, i.line_no) for i in issues] == [("line_too_long", 1, 2)]
    assert issues[0].sample == "x" * 200


def test_empty_file_is_counted(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"")
    lines, issues = read_all(path)
    assert lines == []
    assert [i.reason for i in issues] == ["empty_file"]


def test_truncated_gzip_keeps_lines_before_the_cut(tmp_path):
    whole = gzip.compress("".join(f"line number {i} with some text\n" for i in range(5000)).encode(), mtime=0)
    path = tmp_path / "a.log.gz"
    path.write_bytes(whole[: len(whole) // 2])
    lines, issues = read_all(path, chunk_bytes=4096)
    assert 0 < len(lines) < 5000
    assert lines[:2] == [(1, "line number 0 with some text"), (2, "line number 1 with some text")]
    assert all(text.startswith("line number") for _, text in lines[:-1])
    assert [i.reason for i in issues] == ["gzip_truncated"]


def test_corrupt_gzip_is_counted(tmp_path):
    path = tmp_path / "a.log.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"not really deflate data at all" * 10)
    lines, issues = read_all(path)
    assert lines == []
    assert [i.reason for i in issues] == ["gzip_corrupt"]


def test_gzip_reads_like_plain(tmp_path):
    text = "alpha\nbeta\r\ngamma\n"
    plain, packed = tmp_path / "a.log", tmp_path / "b.log.gz"
    plain.write_bytes(text.encode())
    packed.write_bytes(gzip.compress(text.encode()))
    assert read_all(plain)[0] == read_all(packed)[0] == [(1, "alpha"), (2, "beta"), (3, "gamma")]


def test_a_line_of_exactly_the_limit_ending_in_cr_at_a_chunk_end_is_kept(tmp_path):
    """Found by the fuzz test: the \\r that ends a line was counted in its length while the
    reader waited to see whether a \\n followed, so a line of exactly ``max_line_bytes`` was set
    aside as too long when a chunk ended right after its \\r."""
    path = tmp_path / "rank-0.log"
    path.write_bytes("00\u00a0\r\n0".encode("utf-8"))  # line 1 is 4 bytes
    rank_file = RankFile("j", "n", 0, str(path), "j/n/rank-0.log", path.stat().st_size)
    for chunk in (1, 2, 3, 4, 5, 6, 100):
        items = list(read_lines(rank_file, ReadLimits(max_line_bytes=4, chunk_bytes=chunk)))
        lines = [line for item in items if isinstance(item, tuple) for line in item[1]]
        assert lines == ["00\u00a0", "0"], chunk
        assert not [item for item in items if not isinstance(item, tuple)], chunk

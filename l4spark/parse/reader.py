"""Read rank files into lines, with exact line numbers and counted quarantine (pure, no Spark).

This runs inside Spark tasks (see ``ingest.py``): each task reads whole files, so a line's
number is exact whatever the file size and however Spark would have split it. Lines end at
``\\n``, ``\\r\\n`` or a lone ``\\r`` (progress bars overwrite themselves with ``\\r``; each
redraw is a record). The fast path decodes and splits whole chunks in C; a chunk with
undecodable bytes, control characters or an overlong line takes the slow path, line by line.

Nothing is dropped silently. Each set-aside or repaired line is counted as an ``Issue``:
- ``invalid_utf8``: bytes that are not UTF-8, replaced by U+FFFD; the line is kept;
- ``binary_line``: a NUL byte, or more than ``binary_control_share`` control/replacement
  characters; the line is set aside;
- ``line_too_long``: longer than ``max_line_bytes``; set aside (read in bounded memory);
- ``empty_file``, ``gzip_truncated``, ``gzip_corrupt``, ``unreadable_file``: per file; lines
  read before a gzip error are kept.
"""

from __future__ import annotations

import io
import re
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

from l4spark.parse.layout import Issue, RankFile
from l4spark.parse.textrules import DIGIT_BYTES

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")
# control bytes (tab, line ends excepted): a chunk holding none takes the fast path
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0b, 0x0c, *range(0x0e, 0x20), 0x7f])
# \x01 and \x02 mark fields inside the JVM structuring step; a kept line must not carry them.
_MARKERS = str.maketrans({"\x01": "\ufffd", "\x02": "\ufffd"})
SAMPLE_CHARS = 200


@dataclass(frozen=True)
class ReadLimits:
    max_line_bytes: int = 1024 * 1024
    chunk_bytes: int = 4 * 1024 * 1024
    binary_control_share: float = 0.3


class _IssueCounter:
    """Collapses repeated issues of one file into one Issue per reason (count, first line)."""

    def __init__(self, rank_file: RankFile) -> None:
        self._file = rank_file
        self._by_reason: dict[str, Issue] = {}

    def add(self, reason: str, detail: str, line_no: int | None = None, sample: str | None = None,
            n_lines: int = 1, n_bytes: int = 0) -> None:
        previous = self._by_reason.get(reason)
        if previous is None:
            self._by_reason[reason] = Issue(self._file.job_id, self._file.rel_path, reason, detail,
                                            n_lines, n_bytes, line_no, (sample or "")[:SAMPLE_CHARS] or None)
        else:
            self._by_reason[reason] = Issue(previous.job_id, previous.file, reason, previous.detail,
                                            previous.n_lines + n_lines, previous.n_bytes + n_bytes,
                                            previous.line_no, previous.sample)

    def issues(self) -> list[Issue]:
        return list(self._by_reason.values())


def read_lines(rank_file: RankFile, limits: ReadLimits, fold: bool = False,
               content: bytes | None = None) -> Iterator[tuple[int, list[str | None], list[str] | None] | Issue]:
    """Yield ``(first_line_no, lines, shapes)`` blocks in file order, then the file's Issues.

    Line numbers start at 1 and count every line of the file; a set-aside line is None in its
    block, so the numbers of the others stay exact. ``fold``: ``shapes`` holds each line's
    ``textrules.fold_digits`` when the block took the fast path (folded on the bytes before
    decoding: no second encode of the text); otherwise, and without ``fold``, it is None.
    ``content``: the file's bytes as stored (a remote file, read by Spark's ``binaryFile``
    source); the file is opened by its path when None.
    """
    counter = _IssueCounter(rank_file)
    saw_bytes = False
    try:
        with _open(rank_file, content) as stream:
            for block_start, lines, shapes, saw in _blocks(stream, limits, counter, fold):
                saw_bytes = saw_bytes or saw
                if lines:
                    yield block_start, lines, shapes
    except EOFError as exc:
        counter.add("gzip_truncated", f"compressed stream ends early ({exc}); lines before the cut are kept",
                    n_lines=0)
    except zlib.error as exc:
        counter.add("gzip_corrupt", f"corrupt gzip data ({exc}); lines before the damage are kept", n_lines=0)
    except OSError as exc:
        counter.add("unreadable_file", f"cannot read the file: {exc}", n_lines=0)
    if not saw_bytes and not counter.issues():
        counter.add("empty_file", "file holds no bytes", n_lines=0)
    yield from counter.issues()


def _open(rank_file: RankFile, content: bytes | None = None) -> BinaryIO:
    raw = open(rank_file.path, "rb") if content is None else io.BytesIO(content)
    return _GzipStream(raw) if rank_file.compressed else raw


class _GzipStream:
    """A .gz file read like ``gzip.open``, but every byte decompressed before damage is handed
    out first, and the error (EOFError: truncated; zlib.error: corrupt) comes with the next read.
    (``gzip.open(...).read(n)`` raises inside the call and loses the up to ``n`` bytes it had
    decompressed: a truncated log lost its last chunk of lines.) Concatenated members are read
    in turn; output is produced at most ``_STEP`` bytes at a time, so memory stays bounded. At
    damage, what the last ``_PIECE`` compressed bytes decoded to is lost (zlib gives no partial
    output with an error)."""

    _RAW = 64 * 1024
    _PIECE = 1024
    _STEP = 1024 * 1024

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._input = b""
        self._out = bytearray()
        self._error: Exception | None = None
        self._seen_input = False

    def __enter__(self) -> "_GzipStream":
        return self

    def __exit__(self, *exc) -> None:
        self._raw.close()

    def read(self, size: int) -> bytes:
        while len(self._out) < size and self._error is None and self._fill():
            pass
        if not self._out and self._error is not None:
            raise self._error
        data = bytes(self._out[:size])
        del self._out[:size]
        return data

    def _fill(self) -> bool:
        """Decompress some more; False at the end of the data (or at damage, kept in _error)."""
        try:
            if not self._input:
                self._input = self._raw.read(self._RAW)
                if not self._input:
                    if self._seen_input and not self._inflate.eof:
                        raise EOFError("compressed file ended before the end-of-stream marker was reached")
                    return False
                self._seen_input = True
            if self._inflate.eof and not self._input.strip(b"\0"):
                self._input = b""  # zero padding after the last member (as gzip.open allows)
                return True
            if self._inflate.eof:  # another member follows
                self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            # small input pieces: at damage, zlib raises and drops what that one call decoded
            piece, rest = self._input[:self._PIECE], self._input[self._PIECE:]
            self._out += self._inflate.decompress(piece, self._STEP)
            self._input = (self._inflate.unconsumed_tail or self._inflate.unused_data) + rest
            return True
        except (EOFError, zlib.error) as exc:
            self._error = exc
            return False


def _blocks(stream: BinaryIO, limits: ReadLimits, counter: _IssueCounter,
            fold: bool) -> Iterator[tuple[int, list[str | None], list[str] | None, bool]]:
    """Yield (first_line_no, lines, shapes, read_any_bytes) per chunk, in bounded memory."""
    line_no = 1
    pending = b""
    skipping_from: int | None = None  # line number of an overlong line being discarded
    drop_lf = False  # a line just ended in \r at a chunk end: a \n first in the next chunk belongs to it
    while True:
        chunk = stream.read(limits.chunk_bytes)
        eof = not chunk
        if drop_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        drop_lf = False
        if skipping_from is not None:
            end = _line_end(chunk)
            if end < 0 and not eof:
                yield line_no, [], None, True
                continue
            drop_lf = end == len(chunk) - 1 and chunk.endswith(b"\r")
            chunk = chunk[end + 1:] if end >= 0 else b""
            skipping_from, line_no = None, line_no + 1
        data = pending + chunk
        if eof:
            complete, pending = data, b""
        else:
            cut = max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - 1))
            complete, pending = data[:cut + 1], data[cut + 1:]
        if complete:
            lines, shapes = _split(complete, line_no, limits, counter, fold)
            yield line_no, lines, shapes, True
            line_no += len(lines)
        elif chunk:
            yield line_no, [], None, True
        # a \r last in ``pending`` ends its line (or starts a \r\n): it is not part of the line
        if len(pending) - pending.endswith(b"\r") > limits.max_line_bytes:
            counter.add("line_too_long", f"line longer than {limits.max_line_bytes} bytes set aside",
                        line_no=line_no, sample=pending[:SAMPLE_CHARS].decode("utf-8", "replace"))
            if pending.endswith(b"\r") and not eof:  # the line has ended (\r, or \r\n across the chunks)
                line_no, pending, drop_lf = line_no + 1, b"", True
            else:
                skipping_from, pending = line_no, b""
        if eof:
            return


def _line_end(chunk: bytes) -> int:
    """Index of the last byte of the first line end in ``chunk`` (\\r\\n counts as one), or -1."""
    ends = [i for i in (chunk.find(b"\n"), chunk.find(b"\r")) if i >= 0]
    if not ends:
        return -1
    end = min(ends)
    return end + 1 if chunk[end:end + 2] == b"\r\n" else end


def _split(complete: bytes, first_line: int, limits: ReadLimits, counter: _IssueCounter,
           fold: bool = False) -> tuple[list[str | None], list[str] | None]:
    """The lines of ``complete`` (which ends at a line end, or at the end of the file), and
    with ``fold`` on the fast path their digit-folded shapes."""
    # deleting the control bytes is 4x faster than a regex search for them
    if len(complete.translate(None, _CONTROL_BYTES)) == len(complete):
        try:
            lines = _text_lines(complete.decode("utf-8"))
        except UnicodeDecodeError:
            pass
        else:
            # a character takes at most 4 bytes: count the bytes only when that bound is too loose
            if (max(map(len, lines), default=0) * 4 <= limits.max_line_bytes
                    or max(map(len, complete.splitlines())) <= limits.max_line_bytes):
                # a UTF-8 sequence holds no ASCII digit byte: folding the bytes folds the characters
                return lines, _text_lines(complete.translate(DIGIT_BYTES).decode("utf-8")) if fold else None
    return _split_slow(complete.splitlines(), first_line, limits, counter), None


def _text_lines(text: str) -> list[str]:
    """``text`` split at \\n, \\r\\n and lone \\r, as ``bytes.splitlines`` does (no empty last line)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def _split_slow(raw_lines: list[bytes], first_line: int, limits: ReadLimits, counter: _IssueCounter) -> list[str | None]:
    """Line by line: decode with replacement, set aside binary and overlong lines.

    Set-aside lines become None so that the caller keeps exact line numbers.
    """
    out: list[str | None] = []
    for offset, raw in enumerate(raw_lines):
        line_no = first_line + offset
        if len(raw) > limits.max_line_bytes:
            counter.add("line_too_long", f"line longer than {limits.max_line_bytes} bytes set aside",
                        line_no=line_no, sample=raw[:SAMPLE_CHARS].decode("utf-8", "replace"), n_bytes=len(raw))
            out.append(None)
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")
            counter.add("invalid_utf8", "bytes that are not UTF-8 replaced by U+FFFD; line kept",
                        line_no=line_no, sample=text, n_bytes=len(raw))
        if "\x00" in text or (text and len(_CONTROL.findall(text)) > limits.binary_control_share * len(text)):
            counter.add("binary_line", "binary data (NUL or mostly control bytes) set aside",
                        line_no=line_no, sample=text.encode("unicode_escape").decode("ascii"), n_bytes=len(raw))
            out.append(None)
            continue
        out.append(text.translate(_MARKERS))
    return out

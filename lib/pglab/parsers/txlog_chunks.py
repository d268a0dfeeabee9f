"""A log as a series of chunks of whole lines: read from a stream into one reused buffer, or mapped.

Why: a paper-profile point writes logs of about 1 GB, so a log is never held whole: it is read
chunk by chunk, and a plain file is mapped rather than copied (the compiled loop reads the page cache
in place), its pages dropped once scanned.
"""

from __future__ import annotations

import io
import mmap
import os
from collections.abc import Callable, Iterator
from typing import BinaryIO


def _fill(stream: BinaryIO, buf: bytearray, start: int) -> int:
    """Read into ``buf[start:]`` until it is full or the stream ends; the end of the data in ``buf``."""
    pos = start
    with memoryview(buf) as view:
        while pos < len(buf):
            n = stream.readinto(view[pos:])
            if not n:
                break
            pos += n
    return pos


def read_chunks(stream: BinaryIO, chunk_bytes: int) -> Iterator[tuple[int, bytearray, int]]:
    """``(offset, buf, end)``: ``buf[:end]`` holds whole lines read from ``offset`` of the stream.

    One buffer is reused (valid until the next item); a line longer than it grows it.
    """
    buf = bytearray(max(chunk_bytes, 1))
    keep = offset = 0  # keep: bytes of an unfinished line carried to the front of buf
    while True:
        end = _fill(stream, buf, keep)
        if end < len(buf):  # end of the stream
            if end:
                yield offset, buf, end
            return
        cut = buf.rfind(b"\n", 0, end) + 1
        if cut == 0:
            buf, keep = buf + bytearray(len(buf)), end
            continue
        yield offset, buf, cut
        offset += cut
        keep = end - cut
        buf[:keep] = buf[cut:end]


def map_file(stream: BinaryIO) -> mmap.mmap | None:
    """A plain file mapped in memory, or None (gzip, bytes, empty, or a file that can't be mapped).

    Why: the compiled loop then reads the page cache in place, where copying the file into a buffer
    took a sixth of the parse, on one core while the others waited. Copy-on-write, so that the arrays
    on it are writable as the loop's signature wants; nothing is written. A log truncated while it is
    read would end the process (SIGBUS), as with any mapped file: pglab reads finished logs.
    """
    if not isinstance(stream, io.FileIO):
        return None
    try:
        if os.fstat(stream.fileno()).st_size == 0:
            return None
        return mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):
        return None


def mapped_chunks(mm: mmap.mmap, chunk_bytes: int) -> Iterator[tuple[int, memoryview, int]]:
    """:func:`read_chunks` of a mapped file: ``view`` is the mapping from ``offset`` to the end of the file
    (valid until the next item), ``view[:end]`` whole lines. Pages are dropped from the process once
    scanned (they stay in the page cache), so it holds about a chunk of the file, not all of it."""
    size = len(mm)
    drop = getattr(mmap, "MADV_DONTNEED", None)
    offset = 0
    while offset < size:
        stop = offset + chunk_bytes
        if stop >= size:
            stop = size
        else:
            cut = mm.rfind(b"\n", offset, stop) + 1
            stop = cut if cut > offset else (mm.find(b"\n", stop) + 1 or size)  # a line longer than a chunk
        view = memoryview(mm)[offset:]
        yield offset, view, stop - offset
        view.release()
        page = mmap.PAGESIZE
        if drop is not None and stop // page > offset // page:
            mm.madvise(drop, offset // page * page, (stop // page - offset // page) * page)
        offset = stop


def lines_before(open_stream: Callable[[], BinaryIO], nbytes: int) -> int:
    """How many lines (as :func:`~pglab.parsers.text.split_lines` splits them) the first ``nbytes`` hold:
    only for an error message."""
    count, after_cr = 0, False
    with open_stream() as f:
        while nbytes > 0:
            data = f.read(min(nbytes, 16 << 20))
            if not data:
                break
            nbytes -= len(data)
            count += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n") - (after_cr and data[:1] == b"\n")
            after_cr = data[-1:] == b"\r"
    return count

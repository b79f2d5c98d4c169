"""`file_stamp`: a file's identity for cheap change checks between servers sharing a file, from one
stat. Shared files here are replaced atomically (a new inode per write), so another server's write
changes the stamp even when the size and the clock's granularity would not."""

from __future__ import annotations

import os
from pathlib import Path

FileStamp = tuple[int, int, int] | None  # (mtime_ns, size, inode); None: no such file


def file_stamp(path: Path) -> FileStamp:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino

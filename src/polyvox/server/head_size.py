"""The bound on a request head's size: `HeadMeter` counts the bytes of the head a connection is
sending (its request line and headers, up to the blank line that ends them), however they are split
into reads, so that a head over `MAX_HEAD_BYTES` is refused (`server.connections` answers 431) whether
it arrives in one read or in many. h11's own bound holds only for a head still incomplete after a
read, so a head of up to a read's size (64 KiB or more) got through it."""

from __future__ import annotations

MAX_HEAD_BYTES = 16 * 1024
_END = b"\r\n\r\n"


class HeadMeter:
    def __init__(self, limit: int = MAX_HEAD_BYTES):
        self.limit = limit
        self._seen = 0  # bytes of the awaited head received so far
        self._tail = b""  # its last bytes, where the blank line may begin

    def too_large(self, data: bytes) -> bool:
        """Whether the head, with `data` (the next bytes received while one is awaited), is over the
        limit; once its end is in `data` the meter starts again for the next head."""
        window = self._tail + data
        end = window.find(_END)
        if end < 0:
            self._seen += len(data)
            self._tail = window[-(len(_END) - 1) :]
            return self._seen > self.limit
        size = self._seen - len(self._tail) + end + len(_END)
        self._seen, self._tail = 0, b""
        return size > self.limit

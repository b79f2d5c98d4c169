"""The length a WAV file's header declares, read from its RIFF chunks as written (`fmt ` and `data`,
or RF64's `ds64`). ffmpeg reports a WAV's length clipped to what the file holds, so a header claiming
hours over two seconds of samples would pass for two seconds; decoding trusts neither, but a header
that states more than an upload may hold is refused before anything is decoded."""

from __future__ import annotations

import struct

# A streamed WAV's sizes are "unknown" (0xFFFFFFFF, or 0 from writers that never come back to them):
# such a header declares no length. RF64 also writes 0xFFFFFFFF and keeps the real size in `ds64`.
UNKNOWN_SIZES = frozenset({0, 0xFFFFFFFF})


def declared_seconds(data: bytes) -> float | None:
    """The seconds of audio the header of the RIFF (or RF64) WAVE file `data` declares; None when it is
    not one, its header cannot be read, or it declares no length (a streamed WAV's unknown size)."""
    if len(data) < 12 or data[8:12] != b"WAVE" or data[:4] not in (b"RIFF", b"RF64"):
        return None
    rate = block_align = 0
    rf64_data_size: int | None = None
    offset = 12
    while offset + 8 <= len(data):
        chunk, size = data[offset : offset + 4], struct.unpack_from("<I", data, offset + 4)[0]
        body = offset + 8
        if chunk == b"ds64" and body + 16 <= len(data):
            rf64_data_size = struct.unpack_from("<Q", data, body + 8)[0]
        elif chunk == b"fmt " and body + 14 <= len(data):
            rate = struct.unpack_from("<I", data, body + 4)[0]
            block_align = struct.unpack_from("<H", data, body + 12)[0]
        elif chunk == b"data":
            if size == 0xFFFFFFFF and rf64_data_size is not None:
                size = rf64_data_size
            if size in UNKNOWN_SIZES or rate == 0 or block_align == 0:
                return None
            return size / block_align / rate
        offset = body + size + (size & 1)  # chunks are padded to an even length
    return None

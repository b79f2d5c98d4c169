"""The audio cache on disk keeps an answer's word timings with its audio (format 2), answers entries
without them as before, and an upgraded format-1 directory loses its old entries (they hold no words
and their keys, which name the format, are never asked for again)."""

from __future__ import annotations

import json
import struct

import numpy as np

from polyvox.alignment.timeline import PieceTiming
from polyvox.alignment.words import WordTiming
from polyvox.cache import AudioCache

PIECES = (
    PieceTiming(0, "Hi there.", 0.0, 0.5, (WordTiming("Hi", 0.0, 0.2), WordTiming("there.", 0.25, 0.5))),
)


def test_an_entry_keeps_its_words_and_one_without_has_none(tmp_path) -> None:
    cache = AudioCache(tmp_path, 10_000_000)
    samples = np.linspace(-1, 1, 1200, dtype=np.float32)
    assert cache.put("timed", samples, 24_000, PIECES) and cache.put("plain", samples, 24_000)
    reopened = AudioCache(tmp_path, 10_000_000)  # as a restarted server reads them
    timed, plain = reopened.get("timed"), reopened.get("plain")
    assert timed is not None and plain is not None
    assert np.array_equal(timed.samples, samples) and timed.pieces == PIECES
    assert np.array_equal(plain.samples, samples) and plain.pieces is None


def test_an_entry_whose_words_are_damaged_is_a_miss_and_removed(tmp_path) -> None:
    cache = AudioCache(tmp_path, 10_000_000)
    cache.put("timed", np.zeros(100, np.float32), 24_000, PIECES)
    path = tmp_path / "timed.pcm"
    data = bytearray(path.read_bytes())
    data[-3:] = b"???"
    path.write_bytes(bytes(data))
    assert cache.get("timed") is None and not path.exists()


def test_a_format_1_directory_is_upgraded_and_its_entries_removed(tmp_path) -> None:
    (tmp_path / "format.json").write_text(json.dumps({"format": 1}))
    old = tmp_path / "old.pcm"
    old.write_bytes(struct.pack("<8sIIQd", b"PVXAUDIO", 1, 24_000, 1, 0.0) + b"\0\0\0\0")
    cache = AudioCache(tmp_path, 10_000_000)
    assert not old.exists() and len(cache) == 0
    assert json.loads((tmp_path / "format.json").read_text())["format"] == 2

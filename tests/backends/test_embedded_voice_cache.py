"""The embedded voice's marked model (its phoneme lengths an output, for exact word times) is kept in the
user's cache, so a later start needs no `onnx` package: checked against its pin before it is used, and
never in the way when the cache is missing, wrong or cannot be written."""

from __future__ import annotations

import asyncio
import hashlib
import sys

import pytest

from polyvox.backends.base import SynthesisRequest
from polyvox.backends.embedded import EmbeddedBackend
from polyvox.backends.embedded_voice import (
    ALIGNED_SHA256,
    VOICE_SHA256,
    VoiceFiles,
    locate_voice,
    read_verified,
    with_alignments,
)

SENTENCE = "The garden was quiet this morning."


def timed_words(backend: EmbeddedBackend) -> list:
    """The word spans the voice itself reports for SENTENCE (none: it could not time its words)."""

    async def run() -> list:
        await backend.start()
        try:
            request = SynthesisRequest(text=SENTENCE, spans=[])
            audio = [chunk async for chunk in backend.generate(request)]
            assert sum(chunk.size for chunk in audio) > backend.info.sample_rate  # it spoke
            return request.spans
        finally:
            await backend.stop()

    return asyncio.run(run())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "polyvox" / "embedded-voice" / f"{ALIGNED_SHA256}.onnx"


def without_onnx(monkeypatch) -> None:
    """`import onnx` fails from here on, as where piper's `alignment` extra is not installed."""
    monkeypatch.setitem(sys.modules, "onnx", None)


def test_a_second_start_reads_the_marked_voice_from_the_cache_without_onnx(cache, monkeypatch):
    first = timed_words(EmbeddedBackend(max_workers=1))
    assert len(first) == len(SENTENCE.split())
    assert hashlib.sha256(cache.read_bytes()).hexdigest() == ALIGNED_SHA256

    without_onnx(monkeypatch)
    again = timed_words(EmbeddedBackend(max_workers=1))
    assert [(s.start, s.end) for s in again] == [(s.start, s.end) for s in first]
    assert not any(span.approximate for span in again)


def test_with_the_marked_voice_cached_a_start_needs_nothing_of_the_package_s_model_file(cache, tmp_path):
    """What runs is the checked marked model alone: the package's 60 MB file is not read again (nor
    hashed) at each start, so one that is gone or changed since cannot stop it."""
    first = timed_words(EmbeddedBackend(max_workers=1))
    changed = tmp_path / "changed.onnx"
    changed.write_bytes(b"not the voice")
    for model in (changed, tmp_path / "gone.onnx"):
        files = VoiceFiles(model=model, config=locate_voice().config)
        again = timed_words(EmbeddedBackend(max_workers=1, files=files))
        assert [(s.start, s.end) for s in again] == [(s.start, s.end) for s in first]


def test_a_cached_file_that_is_not_the_pinned_one_is_never_used_and_is_replaced(cache, monkeypatch):
    marked = with_alignments(read_verified(locate_voice().model, VOICE_SHA256))
    assert hashlib.sha256(marked).hexdigest() == ALIGNED_SHA256
    cache.parent.mkdir(parents=True)
    cache.write_bytes(marked[:-1] + b"\0")  # the marked model, one byte changed

    with monkeypatch.context() as blocked:
        without_onnx(blocked)
        # without onnx, the voice can only be the unmarked one: it speaks, but cannot time its words
        assert timed_words(EmbeddedBackend(max_workers=1)) == []

    assert len(timed_words(EmbeddedBackend(max_workers=1))) == len(SENTENCE.split())
    assert hashlib.sha256(cache.read_bytes()).hexdigest() == ALIGNED_SHA256


def test_a_cache_that_cannot_be_written_costs_only_the_marking(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # its polyvox/ can never be made, even by root
    assert len(timed_words(EmbeddedBackend(max_workers=1))) == len(SENTENCE.split())
    assert blocker.read_text() == "not a directory"


def test_a_user_without_a_home_directory_still_gets_a_voice_that_times_its_words(monkeypatch):
    # an arbitrary UID in a container: no HOME, no passwd entry, so no ~/.cache to keep anything in
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)

    def no_entry(uid: int):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr("pwd.getpwuid", no_entry)
    assert len(timed_words(EmbeddedBackend(max_workers=1))) == len(SENTENCE.split())

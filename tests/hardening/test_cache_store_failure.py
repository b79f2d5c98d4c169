"""An answer whose audio the cache failed to store says so: `X-Cache: MISS-STORE-FAILED` on a
whole-file answer (the embedded voice, a real server), while the request itself succeeds."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import httpx
import pytest

from helpers.audio import decode

SPEECH = "/v1/audio/speech"


def _speak(url: str, text: str) -> httpx.Response:
    body = {"input": text, "response_format": "wav", "stream": False}
    response = httpx.post(f"{url}{SPEECH}", json=body, timeout=120)
    assert response.status_code == 200, response.text
    samples, _ = decode(response.content)
    assert samples.size > 0
    return response


def test_a_store_that_fails_answers_miss_store_failed(
    serve, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    embedded = pytest.importorskip("polyvox.backends.embedded")
    cache = tmp_path / "cache"
    url = serve(embedded.EmbeddedBackend(), cache_enabled=True, cache_dir=cache)
    assert _speak(url, "Stored first.").headers["X-Cache"] == "MISS"
    assert _speak(url, "Stored first.").headers["X-Cache"] == "HIT"

    # The cache directory is replaced by a file under the running server: every write now fails.
    shutil.rmtree(cache)
    cache.write_bytes(b"")
    with caplog.at_level(logging.WARNING, logger="polyvox.cache"):
        assert _speak(url, "Not stored.").headers["X-Cache"] == "MISS-STORE-FAILED"
    assert "audio cache write failed" in caplog.text
    assert _speak(url, "Not stored.").headers["X-Cache"] == "MISS-STORE-FAILED"  # nothing was kept

    cache.unlink()
    cache.mkdir()  # the directory is back: storing works again
    assert _speak(url, "Not stored.").headers["X-Cache"] == "MISS"
    assert _speak(url, "Not stored.").headers["X-Cache"] == "HIT"

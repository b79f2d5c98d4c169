"""Request text never reaches the logs, at any level, unless `log_request_text` is set: the log keeps
its length and a hash. Checked on success, engine failure, input refusal and cache hits."""

from __future__ import annotations

import hashlib
import logging
import re

import httpx

from polyvox.backends.fake import FakeBackend

SPEECH = "/v1/audio/speech"
SECRET = "my bank PIN is 4921 and my password is hunter2"
# The PIN as a word of its own: request ids and hashes are hex, and one may hold "4921" by chance.
PIN = re.compile(r"(?<![0-9a-f])4921(?![0-9a-f])")


def _exercise(url: str) -> None:
    for body in (
        {"input": SECRET},
        {"input": SECRET},  # a cache hit
        {"input": SECRET + " [fail]", "stream_format": "sse"},
        {"input": SECRET + " [fail]", "stream": False},
        {"input": SECRET + " [reject]"},
        {"input": SECRET, "voice": "nobody"},
    ):
        httpx.post(f"{url}{SPEECH}", json=body)


def test_request_text_is_not_logged_by_default(serve, tmp_path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    url = serve(FakeBackend(), cache_enabled=True, cache_dir=tmp_path)
    _exercise(url)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "speech " in logged  # requests are logged...
    assert hashlib.sha256(SECRET.encode()).hexdigest()[:16] in logged  # ...by length and hash
    assert "hunter2" not in logged and not PIN.search(logged)
    assert "hunter2" not in caplog.text


def test_logging_request_text_is_an_explicit_opt_in(serve, caplog) -> None:
    caplog.set_level(logging.INFO)
    url = serve(FakeBackend(), log_request_text=True)
    httpx.post(f"{url}{SPEECH}", json={"input": SECRET})
    assert SECRET in "\n".join(record.getMessage() for record in caplog.records)

"""With `state_url`, a server's audio cache is Redis' from the start: it never opens the disk cache
(whose directory it neither makes nor needs), and a `cache_dir` it could not write does not turn the
Redis cache off. A real server on loopback around the fake engine, against a real redis-server."""

from __future__ import annotations

from pathlib import Path

import httpx

from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

BODY = {"input": "Cached in Redis.", "response_format": "wav"}


def test_the_audio_cache_is_in_redis_and_the_disk_cache_is_never_opened(redis_server, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    settings = Settings(state_url=redis_server.url, cache_enabled=True, cache_dir=blocked / "audio")
    with running_server(create_app(settings, FakeBackend())) as url:
        first = httpx.post(f"{url}/v1/audio/speech", json=BODY, timeout=60)
        again = httpx.post(f"{url}/v1/audio/speech", json=BODY, timeout=60)
    assert (first.status_code, again.status_code) == (200, 200)
    assert (first.headers["x-cache"], again.headers["x-cache"]) == ("MISS", "HIT")
    assert again.content == first.content
    assert blocked.read_text() == "not a directory"

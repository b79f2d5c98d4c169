"""Whether a server needs a key is decided as it starts and never turns back: a Redis that restarts
empty, a last key revoked, or an anonymous `POST /admin/keys` never opens a server (or lets a stranger
close an open one); while the key store cannot vouch for the keys, requests are refused 503 saying why,
and the keys each replica holds are written back to an emptied Redis."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from helpers.redis_server import RedisServer, private_redis
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

BOUND_S = 15.0  # generous: a replica finds the loss at its next read (every 0.5 s)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def keys_cli(*args: str) -> str:
    """`polyvox keys ...` as an operator runs it; its standard output."""
    done = subprocess.run(
        [sys.executable, "-m", "polyvox.cli", "keys", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def create_key(*store_flags: str, name: str = "ops", scopes: tuple[str, ...] = ("admin",)) -> dict:
    return json.loads(keys_cli("create", name, "--scopes", *scopes, "--json", *store_flags))


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    with private_redis() as server:
        yield server


def replicas(redis: RedisServer, tmp_path: Path, count: int = 2, ready: bool = True, **extra) -> ExitStack:
    stack = ExitStack()
    urls = []
    for number in range(count):
        settings = Settings(state_url=redis.url, voices_dir=tmp_path / f"replica-{number}", **extra)
        app = create_app(settings, FakeBackend())
        urls.append(stack.enter_context(running_server(app, wait_ready=ready)))
    stack.urls = urls  # type: ignore[attr-defined]
    return stack


def wait_for_status(url: str, key: str, status: int) -> httpx.Response:
    deadline = time.monotonic() + BOUND_S
    while (answer := httpx.get(f"{url}/v1/models", headers=bearer(key))).status_code != status:
        assert time.monotonic() < deadline, answer.text
        anonymous_is_refused(url)
        time.sleep(0.1)
    return answer


def anonymous_is_refused(url: str) -> None:
    models = httpx.get(f"{url}/v1/models")
    assert models.status_code in (401, 503), models.text
    made = httpx.post(f"{url}/admin/keys", json={"name": "intruder", "scopes": ["admin"]})
    assert made.status_code in (401, 503), made.text


def test_redis_restarted_empty_opens_no_replica_and_every_key_comes_back(redis, tmp_path) -> None:
    admin = create_key("--state-url", redis.url)["key"]
    with replicas(redis, tmp_path) as stack:
        urls = stack.urls
        for url in urls:
            anonymous_is_refused(url)
            assert httpx.get(f"{url}/v1/models", headers=bearer(admin)).status_code == 200
        redis.stop()
        for url in urls:  # Redis away: refused, saying why, once the copy is older than 0.5 s
            anonymous_is_refused(url)
            down = wait_for_status(url, admin, 503)
            assert down.json()["error"]["code"] == "key_store_unavailable"
            assert "cannot be read" in down.json()["error"]["message"]
            assert httpx.get(f"{url}/ready").status_code == 503
        redis.start()  # the same port, no data
        back: set[str] = set()
        deadline = time.monotonic() + BOUND_S
        while back != set(urls):
            assert time.monotonic() < deadline, f"the key works again only on {back}"
            for url in urls:
                anonymous_is_refused(url)
                if httpx.get(f"{url}/v1/models", headers=bearer(admin)).status_code == 200:
                    back.add(url)
            time.sleep(0.1)
        for url in urls:
            anonymous_is_refused(url)
            assert httpx.get(f"{url}/ready").status_code == 200
        listed = httpx.get(f"{urls[1]}/admin/keys", headers=bearer(admin)).json()["data"]
        assert [key["name"] for key in listed] == ["ops"]


def test_a_replica_requiring_keys_refuses_503_until_its_empty_store_has_one(redis, tmp_path) -> None:
    with replicas(redis, tmp_path, count=1, ready=False, require_api_key=True) as stack:
        (url,) = stack.urls
        deadline = time.monotonic() + BOUND_S
        while (ready := httpx.get(f"{url}/ready")).json().get("error", {}).get("code") == "engine_not_ready":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert ready.status_code == 503 and ready.json()["error"]["code"] == "key_store_unavailable"
        refused = httpx.get(f"{url}/v1/models")
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["code"] == "key_store_unavailable" and "holds no keys" in error["message"]
        admin = create_key("--state-url", redis.url)["key"]
        time.sleep(0.6)  # past the copy's freshness, so the next look reads the store
        assert httpx.get(f"{url}/v1/models", headers=bearer(admin)).status_code == 200
        assert httpx.get(f"{url}/v1/models").status_code == 401
        assert httpx.get(f"{url}/ready").status_code == 200


def test_the_last_key_revoked_leaves_the_server_closed(tmp_path) -> None:
    voices = tmp_path / "voices"
    admin = create_key("--voices-dir", str(voices))
    with running_server(create_app(Settings(voices_dir=voices), FakeBackend())) as url:
        assert httpx.get(f"{url}/v1/models").status_code == 401
        gone = httpx.delete(f"{url}/admin/keys/{admin['id']}", headers=bearer(admin["key"]))
        assert gone.status_code == 200
        for key in (None, admin["key"]):
            answer = httpx.get(f"{url}/v1/models", headers=bearer(key) if key else {})
            assert answer.status_code == 401, answer.text
        anonymous_is_refused(url)
    with running_server(create_app(Settings(voices_dir=voices), FakeBackend())) as url:  # restarted
        anonymous_is_refused(url)


def test_an_open_server_makes_no_key_over_http_and_the_clis_key_closes_it(tmp_path) -> None:
    voices = tmp_path / "voices"
    with running_server(create_app(Settings(voices_dir=voices), FakeBackend())) as url:
        assert httpx.get(f"{url}/v1/models").status_code == 200  # open: the operator's choice
        made = httpx.post(f"{url}/admin/keys", json={"name": "first", "scopes": ["admin"]})
        assert made.status_code == 403, made.text
        error = made.json()["error"]
        assert error["code"] == "open_server" and "polyvox keys create" in error["message"]
        assert httpx.get(f"{url}/v1/models").status_code == 200  # and still open to everyone
        admin = create_key("--voices-dir", str(voices))["key"]
        time.sleep(0.6)
        assert httpx.get(f"{url}/v1/models").status_code == 401
        assert httpx.get(f"{url}/v1/models", headers=bearer(admin)).status_code == 200


def test_a_key_file_that_cannot_be_read_refuses_503_not_open(tmp_path) -> None:
    voices = tmp_path / "voices"
    admin = create_key("--voices-dir", str(voices))["key"]
    with running_server(create_app(Settings(voices_dir=voices), FakeBackend())) as url:
        (voices / "keys.json").write_text("{ not json")
        time.sleep(0.6)
        for key in (None, admin):
            answer = httpx.get(f"{url}/v1/models", headers=bearer(key) if key else {})
            assert answer.status_code == 503 and answer.json()["error"]["code"] == "key_store_unavailable"
        (voices / "keys.json").unlink()  # deleted under it: written back from the server's copy
        deadline = time.monotonic() + BOUND_S
        while httpx.get(f"{url}/v1/models", headers=bearer(admin)).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert httpx.get(f"{url}/v1/models").status_code == 401

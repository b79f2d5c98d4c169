"""Usage per key, per model, per day through two servers sharing one voices directory (as the API
processes of `api_server_count` do): the rows equal what the test sent (requests, characters, audio
seconds decoded with PyAV, cache hits), a key sees only its own rows, an admin key every key's, and
/metrics counts per key name."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import openai
import pytest

from helpers.audio import duration
from helpers.metrics import scrape, value
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

ADMIN = "usage-admin-key"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[list[str]]:
    settings = Settings(
        voices_dir=tmp_path_factory.mktemp("voices"),
        admin_api_keys=[ADMIN],
        cache_enabled=True,
        cache_dir=tmp_path_factory.mktemp("cache"),
    )
    with ExitStack() as stack:
        yield [stack.enter_context(running_server(create_app(settings, FakeBackend()))) for _ in range(2)]


def make_key(url: str, name: str) -> str:
    made = httpx.post(f"{url}/admin/keys", json={"name": name}, headers=bearer(ADMIN))
    assert made.status_code == 201, made.text
    return made.json()["key"]


def usage(url: str, key: str, **params: str) -> list[dict]:
    answer = httpx.get(f"{url}/v1/usage", params=params, headers=bearer(key))
    assert answer.status_code == 200, answer.text
    assert answer.json()["object"] == "list"
    return answer.json()["data"]


def test_usage_rows_add_up_what_each_key_did_through_both_servers(servers) -> None:
    first, second = servers
    team_a, team_b = make_key(first, "usage-a"), make_key(first, "usage-b")
    sent = {"usage-a": [], "usage-b": []}
    texts = ["One sentence.", "Another, longer sentence here.", "Third."]
    for n, text in enumerate(texts):
        client = openai.OpenAI(base_url=f"{(first, second)[n % 2]}/v1", api_key=team_a, max_retries=0)
        audio = client.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format="wav")
        sent["usage-a"].append((text, duration(audio.content, "wav")))
    client = openai.OpenAI(base_url=f"{second}/v1", api_key=team_b, max_retries=0)
    for _ in range(2):  # the same twice: the second is a cache hit
        audio = client.audio.speech.create(
            model="tts-1-hd", voice="alloy", input="Cached.", response_format="wav"
        )
        sent["usage-b"].append(("Cached.", duration(audio.content, "wav")))

    today = dt.datetime.now(dt.UTC).date().isoformat()
    mine = usage(first, team_a, start=today, end=today)
    assert [(row["key_name"], row["model"], row["date"]) for row in mine] == [("usage-a", "tts-1", today)]
    row = mine[0]
    assert row["requests"] == 3
    assert row["input_characters"] == sum(len(text) for text, _ in sent["usage-a"])
    assert row["audio_seconds"] == pytest.approx(sum(s for _, s in sent["usage-a"]), abs=0.05)
    assert row["cache_hits"] == 0

    every = {(row["key_name"], row["model"]): row for row in usage(second, ADMIN, start=today, end=today)}
    b = every[("usage-b", "tts-1-hd")]
    assert (b["requests"], b["input_characters"], b["cache_hits"]) == (2, 14, 1)
    assert b["audio_seconds"] == pytest.approx(sum(s for _, s in sent["usage-b"]), abs=0.05)
    assert every[("usage-a", "tts-1")] == row
    assert all(row["key_name"] == "usage-b" for row in usage(second, team_b))  # today by default

    counted = [value(scrape(url), "polyvox_key_requests_total", key="usage-a") for url in servers]
    assert sum(counted) == 3


def test_bad_usage_ranges_are_400(servers) -> None:
    url = servers[0]
    for params in ({"start": "yesterday"}, {"start": "2026-02-01", "end": "2026-01-01"}):
        answer = httpx.get(f"{url}/v1/usage", params=params, headers=bearer(ADMIN))
        assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_value"

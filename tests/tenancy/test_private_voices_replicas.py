"""Private voices across two replicas sharing a real redis-server (`state_url`): key A's voice, cloned
through one replica, is A's through the other at once (listed, spoken) and unknown there to key B; the
keys themselves, made through one replica, are honoured by the other. A fake engine that clones
serves, in this process (the shared state is the feature)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import openai
import pytest

from deploy.cluster import binary
from helpers.redis_server import RedisServer
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings
from voices.clips import wav_clip

pytestmark = pytest.mark.timeout(300)
ADMIN = "replicas-admin-key"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def replicas(tmp_path_factory) -> Iterator[tuple[str, str]]:
    redis = RedisServer(binary("redis-server", "redis-server"))
    tmp = tmp_path_factory.mktemp("private-replicas")
    with ExitStack() as stack:
        redis.start()
        stack.callback(redis.close)
        urls = []
        for name in ("one", "two"):
            settings = Settings(
                state_url=redis.url,
                state_sync_interval_s=60,  # the background sync never runs within a test
                voices_dir=tmp / f"voices-{name}",
                admin_api_keys=[ADMIN],
            )
            urls.append(stack.enter_context(running_server(create_app(settings, FakeBackend(cloning=True)))))
        yield urls[0], urls[1]


def speak(url: str, key: str, voice: str) -> httpx.Response:
    body = {"model": "tts-1", "voice": voice, "input": "Across replicas.", "response_format": "wav"}
    return httpx.post(f"{url}/v1/audio/speech", json=body, headers=bearer(key), timeout=30)


def test_a_voice_cloned_through_one_replica_is_private_on_the_other(replicas) -> None:
    one, two = replicas
    a, b = (
        httpx.post(f"{one}/admin/keys", json={"name": name}, headers=bearer(ADMIN)).json()["key"]
        for name in ("replica-a", "replica-b")
    )
    sdk = openai.OpenAI(base_url=f"{one}/v1", api_key=a, max_retries=0)
    consent = sdk.audio.voice_consents.create(
        name="Cy", language="en", recording=("c.wav", wav_clip(2.0, 140.0), "audio/wav")
    )
    voice = sdk.audio.voices.create(
        name="cy-voice", consent=consent.id, audio_sample=("s.wav", wav_clip())
    ).id

    assert speak(two, a, voice).status_code == 200
    ids = {item["id"] for item in httpx.get(f"{two}/v1/voices", headers=bearer(a)).json()["data"]}
    assert voice in ids
    assert httpx.get(f"{two}/v1/audio/voices/{voice}", headers=bearer(b)).status_code == 404
    assert speak(two, b, voice).json()["error"]["code"] == "voice_not_found"
    ids = {item["id"] for item in httpx.get(f"{two}/v1/voices", headers=bearer(b)).json()["data"]}
    assert voice not in ids
    consents = httpx.get(f"{two}/v1/audio/voice_consents", headers=bearer(b)).json()["data"]
    assert consent.id not in {item["id"] for item in consents}

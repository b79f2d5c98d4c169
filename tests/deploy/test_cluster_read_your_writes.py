"""Read your own writes across replicas: two servers sharing one real redis-server, asked directly and
through nginx running the shipped configuration. A voice uploaded through one replica speaks at once
through the other, a voice deleted through one is refused at once by the other, and the same for a
consent cited and a lexicon entry spoken. The replicas sync in the background only every 60 s, so
nothing here passes by waiting for it. A fake engine that clones serves (the feature is the shared
state; test_cluster_voices speaks through two tiny VoxCPM2 replicas the same way)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from deploy.cluster import binary
from deploy.tools import DEPLOY
from helpers import nginx
from helpers.audio import decode
from helpers.redis_server import RedisServer
from helpers.serve_process import free_port
from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings
from voices.clips import wav_clip

pytestmark = pytest.mark.timeout(300)

REPLICA_HEADER = "x-test-replica"
UPLOADS, DELETES = 50, 20


@dataclass
class Pair:
    """Two replicas' URLs and the nginx in front of both."""

    a: str
    b: str
    balancer: str


def labelled(app, name: str):
    """`app` answering with a header naming the replica, so a test can tell where nginx sent a request."""

    async def answer(scope, receive, send):
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_labelled(message):
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (REPLICA_HEADER.encode(), name.encode())]
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_labelled)

    return answer


@pytest.fixture(scope="module")
def replicas(tmp_path_factory) -> Iterator[Pair]:
    redis = RedisServer(binary("redis-server", "redis-server"))
    nginx_binary = binary("nginx", "nginx")
    tmp: Path = tmp_path_factory.mktemp("read-your-writes")
    with ExitStack() as stack:
        redis.start()
        stack.callback(redis.close)
        urls = []
        for name in ("a", "b"):
            settings = Settings(
                state_url=redis.url,
                state_sync_interval_s=60,  # the background sync never runs within a test
                voices_dir=tmp / f"voices-{name}",
            )
            backend = FakeBackend(cloning=True)
            app = create_app(settings, backend, build_text_pipeline(settings, backend))
            urls.append(stack.enter_context(running_server(labelled(app, name))))
        port = free_port()
        shipped = (DEPLOY / "nginx" / "polyvox.conf").read_text()
        conf = nginx.retarget(shipped, [url.removeprefix("http://") for url in urls], port)
        balancer = stack.enter_context(nginx.running_nginx(nginx_binary, conf, port))
        yield Pair(urls[0], urls[1], balancer)


@functools.cache  # one client per URL: making one costs more than a request here
def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)


def consent_on(url: str) -> str:
    recording = ("consent.wav", wav_clip(2.0, pitch=140.0), "audio/wav")
    return client(url).audio.voice_consents.create(name="Ann", language="en-US", recording=recording).id


def upload(url: str, name: str, consent: str = "true") -> tuple[str, str]:
    """The new voice's id, and the replica that stored it; `consent` is a consent recording's id, or
    "true" (the speaker agreed)."""
    raw = client(url).audio.voices.with_raw_response.create(
        name=name, consent=consent, audio_sample=("clip.wav", wav_clip(1.2, pitch=150.0), "audio/wav")
    )
    return raw.parse().id, raw.headers[REPLICA_HEADER]


def delete(url: str, voice_id: str) -> str:
    raw = client(url).audio.voices.with_raw_response.delete(voice_id)
    assert raw.parse().deleted
    return raw.headers[REPLICA_HEADER]


def speak(url: str, voice: str | dict, text: str = "Hi.") -> tuple[np.ndarray | str, str]:
    """(the audio, the replica that answered), or (the error's code, the replica) when refused."""
    try:
        raw = client(url).audio.speech.with_raw_response.create(
            model="tts-1", voice=voice, input=text, response_format="wav"
        )
    except openai.BadRequestError as exc:
        return exc.body["code"], exc.response.headers[REPLICA_HEADER]
    samples, _ = decode(raw.content)
    return samples, raw.headers[REPLICA_HEADER]


def spoke(outcome: np.ndarray | str) -> bool:
    return isinstance(outcome, np.ndarray) and outcome.size > 0


def refused(outcome: np.ndarray | str) -> bool:
    return isinstance(outcome, str) and outcome == "voice_not_found"


def test_a_voice_uploaded_through_one_replica_speaks_at_once_through_the_other(replicas):
    consent = consent_on(replicas.a)  # cited by the first upload, through B, at once
    failed = []
    for i in range(UPLOADS):
        there, here = (replicas.b, replicas.a) if i % 2 == 0 else (replicas.a, replicas.b)
        voice, stored_on = upload(there, f"Uploaded {i}", consent)
        outcome, spoken_on = speak(here, {"id": voice})
        assert stored_on != spoken_on
        if not spoke(outcome):
            failed.append((i, outcome))
    assert failed == []


def test_a_voice_deleted_through_one_replica_is_refused_at_once_by_the_other(replicas):
    voices = [upload(replicas.a, f"Doomed {i}")[0] for i in range(DELETES)]
    for voice in voices:  # both replicas hold each voice and have spoken with it
        assert spoke(speak(replicas.a, {"id": voice})[0]) and spoke(speak(replicas.b, {"id": voice})[0])
    still_spoken = []
    for i, voice in enumerate(voices):
        there, here = (replicas.a, replicas.b) if i % 2 == 0 else (replicas.b, replicas.a)
        deleted_on = delete(there, voice)
        outcome, refused_on = speak(here, {"id": voice})
        assert deleted_on != refused_on
        if not refused(outcome):
            still_spoken.append(i)
    assert still_spoken == []


def test_through_nginx_every_speech_after_an_upload_speaks_and_after_a_delete_is_refused(replicas):
    failed, crossed = [], 0
    voices = []
    for i in range(UPLOADS):
        voice, stored_on = upload(replicas.balancer, f"Balanced {i}")
        outcome, spoken_on = speak(replicas.balancer, {"id": voice})
        crossed += stored_on != spoken_on
        voices.append(voice)
        if not spoke(outcome):
            failed.append(("upload", i, outcome))
    for i, voice in enumerate(voices[:DELETES]):
        deleted_on = delete(replicas.balancer, voice)
        outcome, refused_on = speak(replicas.balancer, {"id": voice})
        crossed += deleted_on != refused_on
        if not refused(outcome):
            failed.append(("delete", i, outcome))
    assert failed == []
    # nginx spread the pairs over both replicas: most pairs' two requests met different replicas
    assert crossed >= (UPLOADS + DELETES) // 3


def lexicon_terms(url: str) -> set[str]:
    return {item["term"] for item in httpx.get(f"{url}/admin/lexicon").json()["data"]}


def test_a_lexicon_entry_added_through_one_replica_is_spoken_and_known_at_once_by_the_other(replicas):
    plain, _ = speak(replicas.b, "alloy", "Hi.")
    added = httpx.post(f"{replicas.a}/admin/lexicon", json={"term": "Qxv", "say": "A longer replacement"})
    assert added.status_code == 201, added.text
    replaced, _ = speak(replicas.b, "alloy", "Qxv.")
    assert isinstance(plain, np.ndarray) and isinstance(replaced, np.ndarray)
    assert replaced.size > 3 * plain.size  # B said the replacement, not the three letters
    assert "Qxv" in lexicon_terms(replicas.b)

    removed = httpx.delete(f"{replicas.b}/admin/lexicon/Qxv")  # B knows the term A just added
    assert removed.status_code == 200, removed.text
    assert "Qxv" not in lexicon_terms(replicas.a)
    again, _ = speak(replicas.a, "alloy", "Qxv.")
    assert isinstance(again, np.ndarray) and again.size < 2 * plain.size


def test_a_voice_made_through_one_replica_is_shown_renamed_and_deleted_through_the_other(replicas):
    voice, _ = upload(replicas.a, "Shown", consent_on(replicas.a))
    shown = httpx.get(f"{replicas.b}/v1/audio/voices/{voice}")
    assert shown.status_code == 200 and shown.json()["name"] == "Shown"
    renamed = httpx.post(f"{replicas.b}/v1/audio/voices/{voice}", json={"name": "Renamed"})
    assert renamed.status_code == 200, renamed.text
    assert httpx.get(f"{replicas.a}/v1/audio/voices/{voice}").json()["name"] == "Renamed"
    assert delete(replicas.b, voice) == "b"
    assert httpx.get(f"{replicas.a}/v1/audio/voices/{voice}").status_code == 404


def test_processes_sharing_a_voices_directory_and_redis_read_each_others_writes_at_once(tmp_path):
    """As the API processes of `api_server_count` with `state_url` do: one voices directory, one
    Redis, each process its own registry. A delete through one is refused at once by the other, whose
    copy of the directory is the same directory (nothing to pull from Redis, but a registry to reload)."""
    redis = RedisServer(binary("redis-server", "redis-server"))
    with ExitStack() as stack:
        redis.start()
        stack.callback(redis.close)
        urls = []
        for _ in range(2):
            settings = Settings(state_url=redis.url, state_sync_interval_s=60, voices_dir=tmp_path / "voices")
            backend = FakeBackend(cloning=True)
            app = create_app(settings, backend, build_text_pipeline(settings, backend))
            urls.append(stack.enter_context(running_server(labelled(app, str(len(urls))))))
        a, b = urls
        outcomes = []
        for i in range(4):
            there, here = (a, b) if i % 2 == 0 else (b, a)
            voice, _ = upload(there, f"Shared {i}")
            outcomes.append(spoke(speak(here, {"id": voice})[0]))
            delete(there, voice)
            outcomes.append(refused(speak(here, {"id": voice})[0]))
        assert outcomes == [True] * 8

"""Private voices and consents: one cloned with key A belongs to A. For key B it does not exist on any
route (the voice lists, its detail, renaming, deleting, speech over HTTP and the WebSocket: answered
exactly as an unknown voice), while A and an admin key use it; one made `shared` is every key's; B
cannot cite A's consent nor take the name of A's voice. Real server, official client, a fake engine
that clones (the same on VoxCPM2: tests/voices/test_private_voices_voxcpm2.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from websockets.sync.client import connect

from helpers.audio import decode
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings
from voices.clips import wav_clip

ADMIN = "private-admin-key"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def sdk(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


@pytest.fixture(scope="module")
def team(tmp_path_factory) -> Iterator[tuple[str, str, str]]:
    settings = Settings(
        voices_dir=tmp_path_factory.mktemp("voices"),
        admin_api_keys=[ADMIN],
        cache_enabled=True,
        cache_dir=tmp_path_factory.mktemp("cache"),
    )
    with running_server(create_app(settings, FakeBackend(cloning=True))) as url:
        keys = []
        for name in ("team-a", "team-b"):
            made = httpx.post(f"{url}/admin/keys", json={"name": name}, headers=bearer(ADMIN))
            keys.append(made.json()["key"])
        yield url, keys[0], keys[1]


def clone(url: str, key: str, name: str, **extra: str) -> str:
    client = sdk(url, key)
    consent = client.audio.voice_consents.create(
        name="Ann", language="en-US", recording=("c.wav", wav_clip(2.0, pitch=140.0), "audio/wav")
    )
    voice = client.audio.voices.create(
        name=name, consent=consent.id, audio_sample=("s.wav", wav_clip()), extra_body=extra or None
    )
    return voice.id


def speak(url: str, key: str, voice: str) -> httpx.Response:
    body = {"model": "tts-1", "voice": voice, "input": "Private words.", "response_format": "wav"}
    return httpx.post(f"{url}/v1/audio/speech", json=body, headers=bearer(key), timeout=30)


def listed(url: str, key: str) -> tuple[set[str], set[str]]:
    webui = httpx.get(f"{url}/v1/audio/voices", headers=bearer(key)).json()["voices"]
    uttera = httpx.get(f"{url}/v1/voices", headers=bearer(key)).json()["data"]
    return {v["id"] for v in webui}, {v["id"] for v in uttera}


def websocket_config(url: str, key: str, voice: str) -> dict:
    ws_url = url.replace("http://", "ws://") + "/v1/audio/speech/ws"
    with connect(ws_url, additional_headers=bearer(key)) as ws:
        ws.send(json.dumps({"type": "config", "voice": voice}))
        while isinstance(message := ws.recv(timeout=30), bytes):
            pass
        return json.loads(message)


def test_a_cloned_voice_is_its_keys_and_nobody_elses(team) -> None:
    url, a, b = team
    voice = clone(url, a, "alice-private")
    # A: listed, shown, spoken (a cache hit the second time), over the WebSocket too
    assert all(voice in ids for ids in listed(url, a))
    assert httpx.get(f"{url}/v1/audio/voices/{voice}", headers=bearer(a)).status_code == 200
    first = speak(url, a, voice)
    assert first.status_code == 200 and decode(first.content)[0].size > 0
    assert speak(url, a, voice).headers["x-cache"] == "HIT"
    assert websocket_config(url, a, voice)["type"] == "ready"

    # B: nowhere, answered as for a voice that does not exist
    assert not any(voice in ids for ids in listed(url, b))
    unknown, hidden = speak(url, b, "no-such-voice"), speak(url, b, voice)
    assert hidden.status_code == unknown.status_code == 400
    assert hidden.json()["error"]["code"] == unknown.json()["error"]["code"] == "voice_not_found"
    assert websocket_config(url, b, voice)["error"]["code"] == "voice_not_found"
    for method, body in (("GET", None), ("POST", {"name": "Mine now"}), ("DELETE", None)):
        answer = httpx.request(method, f"{url}/v1/audio/voices/{voice}", json=body, headers=bearer(b))
        assert answer.status_code == 404, (method, answer.text)
        assert answer.json()["error"]["type"] == "not_found_error"
    with pytest.raises(openai.ConflictError):  # nor replaced by a voice of B's under its name
        sdk(url, b).audio.voices.create(name=voice, consent=True, audio_sample=("s.wav", wav_clip()))

    # the admin key: everything
    assert all(voice in ids for ids in listed(url, ADMIN))
    assert speak(url, ADMIN, voice).status_code == 200
    # A renames and deletes it
    renamed = httpx.post(f"{url}/v1/audio/voices/{voice}", json={"name": "Alice"}, headers=bearer(a))
    assert renamed.status_code == 200
    assert httpx.delete(f"{url}/v1/audio/voices/{voice}", headers=bearer(a)).status_code == 200


def test_a_consent_is_its_keys_too(team) -> None:
    url, a, b = team
    consent = sdk(url, a).audio.voice_consents.create(
        name="Bo", language="sv", recording=("c.wav", wav_clip(2.0, pitch=140.0), "audio/wav")
    )
    assert consent.id in {c.id for c in sdk(url, a).audio.voice_consents.list()}
    assert consent.id not in {c.id for c in sdk(url, b).audio.voice_consents.list()}
    with pytest.raises(openai.NotFoundError):
        sdk(url, b).audio.voice_consents.retrieve(consent.id)
    with pytest.raises(openai.NotFoundError):
        sdk(url, b).audio.voice_consents.delete(consent.id)
    with pytest.raises(openai.BadRequestError) as cited:
        sdk(url, b).audio.voices.create(
            name="bo-by-b", consent=consent.id, audio_sample=("s.wav", wav_clip())
        )
    assert cited.value.response.json()["error"]["code"] == "consent_not_found"
    assert sdk(url, a).audio.voice_consents.retrieve(consent.id).id == consent.id


def test_a_voice_made_shared_and_the_builtin_voices_are_every_keys(team) -> None:
    url, a, b = team
    voice = clone(url, a, "shared-voice", shared="true")
    assert all(voice in ids for ids in listed(url, b))
    assert speak(url, b, voice).status_code == 200
    assert speak(url, b, "alloy").status_code == 200
    assert websocket_config(url, b, "alloy")["type"] == "ready"


def test_a_shared_voice_stays_its_creators_to_change_replace_and_delete(team) -> None:
    url, a, b = team
    voice = clone(url, a, "team_voice", shared="true")
    assert httpx.get(f"{url}/v1/audio/voices/{voice}", headers=bearer(b)).status_code == 200
    assert speak(url, b, voice).status_code == 200
    for method, body in (("POST", {"name": "B's now"}), ("DELETE", None)):
        answer = httpx.request(method, f"{url}/v1/audio/voices/{voice}", json=body, headers=bearer(b))
        assert answer.status_code == 403, (method, answer.text)
        assert answer.json()["error"]["code"] == "not_owner"
    with pytest.raises(openai.ConflictError):  # B's upload under its name does not take it over
        sdk(url, b).audio.voices.create(name=voice, consent=True, audio_sample=("s.wav", wav_clip()))
    assert speak(url, a, voice).status_code == 200  # still A's: A uses, renames and deletes it
    renamed = httpx.post(f"{url}/v1/audio/voices/{voice}", json={"name": "Team"}, headers=bearer(a))
    assert renamed.status_code == 200 and renamed.json()["name"] == "Team"
    assert httpx.delete(f"{url}/v1/audio/voices/{voice}", headers=bearer(a)).status_code == 200


def test_a_shared_consent_is_cited_by_others_but_changed_only_by_its_creator(team) -> None:
    url, a, b = team
    made = httpx.post(
        f"{url}/v1/audio/voice_consents",
        data={"name": "Cy", "language": "en-US", "shared": "true"},
        files={"recording": ("c.wav", wav_clip(2.0, pitch=140.0), "audio/wav")},
        headers=bearer(a),
    )
    assert made.status_code == 200, made.text
    consent = made.json()["id"]
    assert sdk(url, b).audio.voice_consents.retrieve(consent).id == consent
    renamed = httpx.post(f"{url}/v1/audio/voice_consents/{consent}", json={"name": "B"}, headers=bearer(b))
    assert renamed.status_code == 403 and renamed.json()["error"]["code"] == "not_owner"
    deleted = httpx.delete(f"{url}/v1/audio/voice_consents/{consent}", headers=bearer(b))
    assert deleted.status_code == 403 and deleted.json()["error"]["code"] == "not_owner"
    assert httpx.delete(f"{url}/v1/audio/voice_consents/{consent}", headers=bearer(a)).status_code == 200


def test_voices_of_the_settings_keys_are_every_keys_to_speak_and_the_admins_to_change(team) -> None:
    url, _, b = team
    voice = clone(url, ADMIN, "house_voice")  # a settings key: ownerless, as voices.json's are
    assert speak(url, b, voice).status_code == 200
    for method, body in (("POST", {"name": "B's now"}), ("DELETE", None)):
        answer = httpx.request(method, f"{url}/v1/audio/voices/{voice}", json=body, headers=bearer(b))
        assert answer.status_code == 403 and answer.json()["error"]["code"] == "not_owner", answer.text
    with pytest.raises(openai.ConflictError):
        sdk(url, b).audio.voices.create(name=voice, consent=True, audio_sample=("s.wav", wav_clip()))
    assert httpx.delete(f"{url}/v1/audio/voices/{voice}", headers=bearer(ADMIN)).status_code == 200

"""Every voice consent call through the `openai` SDK (create, retrieve, update, list with cursor
pagination, delete) on a real loopback server, the consents kept beside the voices across a restart,
each bad request's 4xx, and the admin key they need. Consents are engine-agnostic: a fake engine
serves here (the SDK flow on VoxCPM2 is in test_openai_custom_voices)."""

from __future__ import annotations

import httpx
import openai
import pytest

from polyvox.backends.fake import FakeBackend
from voices.clips import wav_clip


def client(url: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def recording(seconds: float = 2.0) -> tuple[str, bytes, str]:
    return ("consent.wav", wav_clip(seconds, pitch=140.0), "audio/wav")


@pytest.fixture
def url(serve, tmp_path) -> str:
    return serve(FakeBackend(cloning=True), voices_dir=tmp_path)


def test_every_consent_call_through_the_sdk(url, tmp_path):
    sdk = client(url)
    made = [
        sdk.audio.voice_consents.create(name=f"Speaker {i}", language="en-US", recording=recording())
        for i in range(5)
    ]
    assert all(c.object == "audio.voice_consent" and c.id.startswith("cons_") for c in made)
    assert len({c.id for c in made}) == 5 and len(list((tmp_path / "consents").iterdir())) == 5

    assert sdk.audio.voice_consents.retrieve(made[0].id) == made[0]
    renamed = sdk.audio.voice_consents.update(made[0].id, name="Jane Roe")
    assert (renamed.id, renamed.name, renamed.language) == (made[0].id, "Jane Roe", "en-US")
    assert sdk.audio.voice_consents.retrieve(made[0].id).name == "Jane Roe"

    page = sdk.audio.voice_consents.list(limit=2)
    assert [c.id for c in page.data] == [made[4].id, made[3].id] and page.has_more
    # The SDK's auto-pagination follows `after` to the end: newest first, each consent once.
    assert [c.id for c in sdk.audio.voice_consents.list(limit=2)] == [c.id for c in reversed(made)]
    raw = httpx.get(f"{url}/v1/audio/voice_consents", params={"after": made[1].id}).json()
    assert raw["object"] == "list" and raw["has_more"] is False
    assert (raw["first_id"], raw["last_id"]) == (made[0].id, made[0].id)

    deleted = sdk.audio.voice_consents.delete(made[1].id)
    assert (deleted.id, deleted.deleted, deleted.object) == (made[1].id, True, "audio.voice_consent")
    assert len(list((tmp_path / "consents").iterdir())) == 4  # its recording went with it
    for call in (
        lambda: sdk.audio.voice_consents.retrieve(made[1].id),
        lambda: sdk.audio.voice_consents.update(made[1].id, name="x"),
        lambda: sdk.audio.voice_consents.delete(made[1].id),
    ):
        with pytest.raises(openai.NotFoundError) as missing:
            call()
        assert missing.value.body["code"] == "consent_not_found"


def test_consents_are_kept_beside_the_voices_across_a_restart(serve, tmp_path):
    consent = client(serve(voices_dir=tmp_path)).audio.voice_consents.create(
        name="Ana", language="pt-BR", recording=recording()
    )
    again = client(serve(voices_dir=tmp_path)).audio.voice_consents.retrieve(consent.id)
    assert again == consent


def test_a_voice_cites_an_existing_consent_which_cannot_go_before_it(url):
    sdk = client(url)
    form = {"name": "anna", "consent": "cons_doesnotexist"}
    unknown = httpx.post(f"{url}/v1/audio/voices", data=form, files={"audio_sample": ("s.wav", wav_clip())})
    assert unknown.status_code == 400
    assert (unknown.json()["error"]["param"], unknown.json()["error"]["code"]) == (
        "consent",
        "consent_not_found",
    )
    assert httpx.get(f"{url}/v1/audio/voices/anna").status_code == 404

    consent = sdk.audio.voice_consents.create(name="Anna", language="sv", recording=recording())
    voice = sdk.audio.voices.create(name="anna", consent=consent.id, audio_sample=("s.wav", wav_clip()))
    assert (voice.id, httpx.get(f"{url}/v1/audio/voices/anna").json()["consent_id"]) == ("anna", consent.id)
    with pytest.raises(openai.ConflictError):
        sdk.audio.voice_consents.delete(consent.id)
    sdk.audio.voices.delete("anna")
    assert sdk.audio.voice_consents.delete(consent.id).deleted


BAD_CREATES = {
    "language": ({"name": "A", "language": "english please"}, recording(), 400, "invalid_language"),
    "name": ({"name": "   ", "language": "en"}, recording(), 400, "invalid_value"),
    "recording": ({"name": "A", "language": "en"}, None, 400, "missing_required_parameter"),
    "not_audio": (
        {"name": "A", "language": "en"},
        ("c.wav", b"not audio" * 300, "audio/wav"),
        400,
        "invalid_audio",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CREATES))
def test_a_bad_consent_gets_its_4xx_and_writes_nothing(url, tmp_path, case):
    form, upload, status, code = BAD_CREATES[case]
    files = {"recording": upload} if upload else None
    response = httpx.post(f"{url}/v1/audio/voice_consents", data=form, files=files)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert response.json()["error"]["param"] == ("recording" if case == "not_audio" else case)
    assert not (tmp_path / "consents").exists() or not any((tmp_path / "consents").iterdir())
    assert httpx.get(f"{url}/v1/audio/voice_consents").json()["data"] == []


def test_bad_updates_and_list_parameters_are_400s(url):
    consent = client(url).audio.voice_consents.create(name="A", language="en", recording=recording())
    lone_surrogate = httpx.post(
        f"{url}/v1/audio/voice_consents/{consent.id}",
        content=b'{"name": "\\udc80"}',
        headers={"Content-Type": "application/json"},
    )
    assert lone_surrogate.status_code == 400 and lone_surrogate.json()["error"]["param"] == "name"
    for params, param in (({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"after": "cons_x"}, "after")):
        response = httpx.get(f"{url}/v1/audio/voice_consents", params=params)
        assert response.status_code == 400 and response.json()["error"]["param"] == param, response.text


def test_changing_consents_needs_the_admin_key_and_reading_them_any_key(serve, tmp_path):
    url = serve(voices_dir=tmp_path, api_keys=["user"], admin_api_keys=["admin"])
    user, admin = client(url, "user"), client(url, "admin")
    with pytest.raises(openai.PermissionDeniedError):
        user.audio.voice_consents.create(name="A", language="en", recording=recording())
    consent = admin.audio.voice_consents.create(name="A", language="en", recording=recording())
    assert user.audio.voice_consents.retrieve(consent.id) == consent
    assert [c.id for c in user.audio.voice_consents.list()] == [consent.id]
    with pytest.raises(openai.PermissionDeniedError):
        user.audio.voice_consents.update(consent.id, name="B")
    with pytest.raises(openai.PermissionDeniedError):
        user.audio.voice_consents.delete(consent.id)
    with pytest.raises(openai.AuthenticationError):
        client(url, "nobody").audio.voice_consents.list()
    assert admin.audio.voice_consents.delete(consent.id).deleted

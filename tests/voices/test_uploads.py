"""Every bad clip gets its own 4xx, naming the parameter, on the voice API and on both speech paths
(multipart upload and JSON `ref_audio`); names are validated; builtins cannot be clobbered; changing
voices needs the admin key. The voice API is engine-agnostic, so a fake engine that clones serves
here."""

from __future__ import annotations

import base64
import re

import httpx
import numpy as np
import pytest

from polyvox.backends.fake import FakeBackend
from voices.clips import wav_bytes, wav_clip

LIMITS = {"voice_min_seconds": 1.0, "voice_max_seconds": 3.0, "max_upload_bytes": 200_000}

BAD_CLIPS = {
    "not_audio": (b"this is a text file, not audio\n" * 64, 400, "invalid_audio"),
    "too_short": (wav_clip(0.4), 400, "audio_too_short"),
    "too_long": (wav_clip(4.0), 400, "audio_too_long"),
    "too_big": (wav_clip(2.0, rate=96000), 413, "upload_too_large"),  # 384 kB of a 2 s clip
    "silent": (wav_bytes(np.zeros(48000, np.float32)), 400, "audio_silent"),
}


@pytest.fixture
def url(serve, tmp_path) -> str:
    return serve(FakeBackend(cloning=True), voices_dir=tmp_path, **LIMITS)


def upload(url: str, name: str, data: bytes, **fields) -> httpx.Response:
    form = {"name": name, "consent": "true", **fields}
    return httpx.post(f"{url}/v1/audio/voices", data=form, files={"audio": ("clip.wav", data)}, timeout=30)


@pytest.mark.parametrize("case", sorted(BAD_CLIPS))
def test_a_bad_voice_upload_gets_its_4xx_and_stores_nothing(url, case):
    data, status, code = BAD_CLIPS[case]
    response = upload(url, "bad", data)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("audio", code)
    assert httpx.get(f"{url}/v1/audio/voices/bad").status_code == 404


@pytest.mark.parametrize("case", sorted(BAD_CLIPS))
def test_a_bad_clone_clip_is_refused_on_the_speech_route(url, case):
    data, status, code = BAD_CLIPS[case]
    multipart = httpx.post(
        f"{url}/v1/audio/speech",
        data={"input": "Hello.", "response_format": "wav"},
        files={"speaker_wav": ("clip.wav", data)},
    )
    assert multipart.status_code == status, multipart.text
    assert (multipart.json()["error"]["param"], multipart.json()["error"]["code"]) == ("speaker_wav", code)
    as_json = httpx.post(
        f"{url}/v1/audio/speech",
        json={"input": "Hello.", "ref_audio": base64.b64encode(data).decode()},
    )
    assert as_json.status_code == status, as_json.text
    assert (as_json.json()["error"]["param"], as_json.json()["error"]["code"]) == ("ref_audio", code)


def test_ref_audio_that_is_not_base64_is_a_400(url):
    response = httpx.post(f"{url}/v1/audio/speech", json={"input": "Hi.", "ref_audio": "%%% not base64 %%%"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "ref_audio"


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "with space", "x" * 65])
def test_a_name_that_is_not_a_voice_id_is_a_label_and_never_a_path(url, name, tmp_path):
    response = upload(url, name, wav_clip())
    assert response.status_code == 201, response.text
    card = response.json()
    assert card["name"] == name and re.fullmatch(r"voice_[0-9a-f]{16}", card["id"])
    stored = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix == ".wav"]
    assert [(p.parent, p.name.split(".")[0]) for p in stored] == [(tmp_path / "uploads", card["id"])]
    assert not (tmp_path.parent / "escape").exists()


@pytest.mark.parametrize("name", ["tab\t", "   ", "x" * 257])
def test_a_voice_name_must_be_text(url, name):
    response = upload(url, name, wav_clip())
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "name"


@pytest.mark.parametrize("name", ["alloy", "Nova"])
def test_builtin_voices_cannot_be_replaced_or_deleted(url, name):
    response = upload(url, name, wav_clip())
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "voice_name_reserved"
    assert httpx.delete(f"{url}/v1/audio/voices/{name.lower()}").status_code == 409
    assert httpx.get(f"{url}/v1/audio/voices/alloy").json()["source"] == "builtin"


def test_storing_a_voice_needs_consent(url):
    refused = upload(url, "anna", wav_clip(), consent="false")
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "consent"
    assert upload(url, "anna", wav_clip()).status_code == 201


def test_out_of_range_voice_settings_are_refused(url):
    response = upload(url, "anna", wav_clip(), cfg_value="9")
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "cfg_value"


def test_changing_voices_needs_the_admin_key(serve, tmp_path):
    url = serve(FakeBackend(cloning=True), voices_dir=tmp_path, api_keys=["user"], admin_api_keys=["admin"])
    user = {"Authorization": "Bearer user"}
    admin = {"Authorization": "Bearer admin"}
    form = {"name": "anna", "consent": "true"}
    files = {"audio": ("clip.wav", wav_clip())}
    assert httpx.post(f"{url}/v1/audio/voices", data=form, files=files, headers=user).status_code == 403
    assert httpx.post(f"{url}/admin/reload-voices", headers=user).status_code == 403
    assert httpx.post(f"{url}/v1/audio/voices", data=form, files=files, headers=admin).status_code == 201
    assert httpx.get(f"{url}/v1/audio/voices/anna", headers=user).status_code == 200
    assert httpx.delete(f"{url}/v1/audio/voices/anna", headers=user).status_code == 403
    assert httpx.delete(f"{url}/v1/audio/voices/anna", headers=admin).status_code == 200
    assert httpx.post(f"{url}/admin/reload-voices", headers=admin).status_code == 200

"""Each malformed voice creation gets its own 4xx naming the field, in both of OpenAI's forms (audio
sample, text prompt) and as JSON or multipart; nothing is stored. Parsing is engine-agnostic: a fake
engine serves here."""

from __future__ import annotations

import httpx
import pytest

from voices.clips import wav_clip

MULTIPART_CASES = {
    "no_sample": ({"name": "anna", "consent": "true"}, None, "audio_sample", "missing_required_parameter"),
    "no_name": ({"consent": "true"}, "audio_sample", "name", "missing_required_parameter"),
    "bad_type": ({"name": "anna", "type": "clone"}, "audio_sample", "type", "invalid_value"),
    "no_consent": ({"name": "anna"}, "audio_sample", "consent", "consent_required"),
}

JSON_CASES = {
    "blank_prompt": ({"type": "prompt", "name": "anna", "prompt": "   "}, "prompt"),
    "long_prompt": ({"type": "prompt", "name": "anna", "prompt": "calm " * 201}, "prompt"),
    "prompt_not_text": ({"type": "prompt", "name": "anna", "prompt": ["calm"]}, "prompt"),
    "blank_script": ({"type": "prompt", "name": "anna", "prompt": "calm", "script_hint": " "}, "script_hint"),
    "control_name": ({"type": "prompt", "name": "an\x00na", "prompt": "calm"}, "name"),
}


@pytest.fixture
def url(serve, tmp_path) -> str:
    return serve(voices_dir=tmp_path)


@pytest.mark.parametrize("case", sorted(MULTIPART_CASES))
def test_a_malformed_sample_form_is_a_400_naming_its_field(url, tmp_path, case):
    form, file_field, param, code = MULTIPART_CASES[case]
    files = {file_field: ("s.wav", wav_clip())} if file_field else {"other": ("x.txt", b"x")}
    response = httpx.post(f"{url}/v1/audio/voices", data=form, files=files)
    assert response.status_code == 400, response.text
    assert (response.json()["error"]["param"], response.json()["error"]["code"]) == (param, code)
    assert not (tmp_path / "uploads").exists() or not any((tmp_path / "uploads").iterdir())


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_a_malformed_prompt_form_is_a_400_naming_its_field(url, case):
    body, param = JSON_CASES[case]
    response = httpx.post(f"{url}/v1/audio/voices", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_a_body_that_is_not_a_form_or_a_json_object_is_refused(url):
    as_list = httpx.post(f"{url}/v1/audio/voices", json=["name", "anna"])
    assert as_list.status_code == 400 and as_list.json()["error"]["code"] == "invalid_json"
    deep = httpx.post(
        f"{url}/v1/audio/voices", content=b"[" * 100_000, headers={"Content-Type": "application/json"}
    )
    assert deep.status_code == 400 and deep.json()["error"]["code"] == "invalid_json"
    text = httpx.post(f"{url}/v1/audio/voices", content=b"name=anna", headers={"Content-Type": "text/plain"})
    assert text.status_code == 415

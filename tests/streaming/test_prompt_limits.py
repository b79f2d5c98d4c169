"""A VoxCPM2 prompt longer than the model's positions is refused naming its longest part: over-long
`instructions` or a reference transcript (`ref_text`) are named, not `input` (tiny VoxCPM2: 1,024
positions, its test tokenizer spends about a token per character)."""

from __future__ import annotations

import base64

import httpx
import pytest

from .conftest import tone_wav

LONG = "a calm and warm voice, " * 80  # 1,840 characters: within max_input_chars, past the positions


def speak(url: str, **fields) -> httpx.Response:
    return httpx.post(f"{url}/v1/audio/speech", json={"input": "Hello there.", **fields}, timeout=120)


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"instructions": LONG}, "instructions"),
        ({"ref_audio": base64.b64encode(tone_wav(1.5)).decode(), "ref_text": LONG}, "ref_text"),
    ],
)
def test_a_prompt_past_the_models_positions_names_its_longest_part(server, fields: dict, param: str):
    url, _ = server
    response = speak(url, **fields)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert "positions" in error["message"]
    assert speak(url, response_format="wav").status_code == 200  # and the server serves on

"""The Clone tab against `polyvox serve --random-weights tiny --device cpu` (VoxCPM2) in headless
Chromium: a one-off clone ("Speak once") asks no consent, as the API asks none; "Save voice" without
the consent box says so in a sentence, before any request; and a recording replaces the file chosen
before it, its length as the page says it the length its player reports."""

from __future__ import annotations

import numpy as np

from helpers.clips import wav_bytes
from voices.clips import voice_like
from web.playground import is_speech_post, open_playground, wait_for_text


def clip_file(samples: np.ndarray, name: str) -> dict:
    return {"name": name, "mimeType": "audio/wav", "buffer": wav_bytes(samples)}


def test_speak_once_needs_no_consent_and_save_asks_for_it_in_words(page, voxcpm2_server):
    open_playground(page, voxcpm2_server)
    page.click("#tab-clone")
    page.set_input_files("#clone-file", files=[clip_file(voice_like(2.0), "mine.wav")])
    assert not page.is_checked("#clone-consent")
    page.fill("#clone-text", "Once.")
    with page.expect_request(is_speech_post):
        page.click("#clone-speak")
    status = wait_for_text(page, "#clone-status", "^(Spoken|Failed)")
    assert status.startswith("Spoken"), page.inner_text("#clone-error")

    voice_posts = []
    page.on("request", lambda r: voice_posts.append(r) if r.url.endswith("/v1/audio/voices") else None)
    page.fill("#clone-name", "no_consent")
    page.click("#clone-save")
    page.wait_for_selector("#clone-error", state="visible")
    error = page.inner_text("#clone-error")
    assert error == (
        "Tick “The speaker agreed to have their voice cloned” first: a voice is saved only with the "
        "speaker's consent."
    )
    assert "POST /v1/audio/voice_consents" not in error and "(400" not in error
    assert voice_posts == []
    page.check("#clone-consent")
    assert page.is_hidden("#clone-error")  # ticking the box clears the sentence


def test_a_recording_replaces_the_chosen_file_and_says_its_own_length(page, voxcpm2_server):
    open_playground(page, voxcpm2_server)
    page.click("#tab-clone")
    page.set_input_files("#clone-file", files=[clip_file(voice_like(2.0), "before.wav")])
    assert page.evaluate("document.getElementById('clone-file').files.length") == 1
    page.click("#clone-record")  # Chromium's fake microphone
    page.wait_for_timeout(2500)
    page.click("#clone-record-stop")
    said = wait_for_text(page, "#clone-clip", "^Recording of")
    assert page.evaluate("document.getElementById('clone-file').files.length") == 0
    assert page.input_value("#clone-file") == ""
    page.wait_for_function("Number.isFinite(document.getElementById('clone-preview').duration)")
    played = page.evaluate("document.getElementById('clone-preview').duration")
    assert said == f"Recording of {played:.1f} s."
    assert 1.0 < played < 3.0

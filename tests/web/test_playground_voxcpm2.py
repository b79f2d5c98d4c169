"""The playground against `polyvox serve --random-weights tiny --device cpu` (VoxCPM2) in headless
Chromium: the VoxCPM2 controls reach the request, the download comes from the audio cache, Clone and
Upload are open, a clip uploaded (or recorded) in the Clone tab becomes a voice that speaks and is
renamed in the Voices tab, and a bad clip shows the API's own error."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from helpers.audio import decode
from helpers.clips import wav_bytes
from voices.clips import voice_like
from web.playground import (
    cut_short_selects,
    heard,
    is_speech_post,
    open_playground,
    right_edges,
    screenshot_tabs,
    seconds,
    speak,
    speech_request_body,
    wait_for_sound,
    wait_for_text,
)


def clip_file(samples: np.ndarray, name: str) -> dict:
    return {"name": name, "mimeType": "audio/wav", "buffer": wav_bytes(samples)}


def test_voxcpm2_controls_reach_the_request_and_the_download_is_a_cache_hit(page, voxcpm2_server, artifacts):
    open_playground(page, voxcpm2_server)
    sent = []
    page.on("request", lambda request: sent.append(request) if is_speech_post(request) else None)
    page.fill("#speak-input", "Designed in the browser.")
    page.select_option("#speak-voice", "alloy")
    page.fill("#speak-instructions", "a calm, low voice")
    page.fill("#speak-cfg", "2.5")
    page.fill("#speak-timesteps", "4")
    page.fill("#speak-seed", "7")
    page.select_option("#speak-format", "mp3")
    with page.expect_response(lambda response: is_speech_post(response.request)) as answer:
        assert speak(page).startswith("Done"), page.inner_text("#speak-error")
    played = speech_request_body(sent[-1])
    model = httpx.get(f"{voxcpm2_server}/v1/models").json()["data"][0]["id"]
    assert played == {
        "model": model,
        "input": "Designed in the browser.",
        "voice": "alloy",
        "instructions": "a calm, low voice",
        "speed": 1,
        "seed": 7,
        "cfg_value": 2.5,
        "inference_timesteps": 4,
        "response_format": "pcm",
        "stream_format": "audio",
    }
    shown = seconds(page.inner_text("#speak-duration"))
    assert shown == pytest.approx(len(answer.value.body()) / 2 / 24000, abs=0.006)
    assert heard(page)[1] > 0

    with page.expect_download() as download:
        page.click("#download-button")
    assert speech_request_body(sent[-1])["response_format"] == "mp3"
    assert "X-Cache: HIT" in wait_for_text(page, "#speak-status", "^Downloaded")
    samples, rate = decode(download.value.path().read_bytes())
    assert samples.size / rate == pytest.approx(shown, abs=0.08)  # the same audio (mp3 pads a little)
    screenshot_tabs(page, artifacts, "voxcpm2")


def test_clone_and_upload_are_open_and_no_select_cuts_the_model_id_short(page, voxcpm2_server):
    open_playground(page, voxcpm2_server)
    model = httpx.get(f"{voxcpm2_server}/v1/models").json()["data"][0]["id"]
    assert page.input_value("#speak-model") == model  # voxcpm2-random-tiny: longer than most choices
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        assert cut_short_selects(page) == [], f"at {width} px"
        header, panel = right_edges(page)
        assert panel == pytest.approx(header, abs=3), f"at {width} px"

    page.click("#tab-clone")
    assert page.is_hidden("#clone-note")
    for control in ("#clone-file", "#clone-record", "#clone-consent", "#clone-speak", "#clone-save"):
        assert page.is_enabled(control), control
    page.click("#tab-voices")
    assert page.is_hidden("#upload-note")
    for control in ("#upload-name", "#upload-file", "#upload-button", "#design-button"):
        assert page.is_enabled(control), control


def test_a_clip_saved_as_a_voice_appears_in_the_picker_speaks_and_is_renamed(page, voxcpm2_server):
    open_playground(page, voxcpm2_server)
    page.click("#tab-clone")
    page.set_input_files("#clone-file", files=[clip_file(voice_like(2.0), "mine.wav")])
    page.fill("#clone-transcript", "A clip made for this test.")
    page.check("#clone-consent")
    page.fill("#clone-name", "browser_voice")
    page.click("#clone-save")
    wait_for_text(page, "#clone-status", '^Saved as voice "browser_voice"')

    page.click("#tab-speak")
    assert page.input_value("#speak-voice") == "browser_voice"  # listed, and picked
    assert "2.0 s clip" in page.inner_text("#voice-description")
    page.fill("#speak-input", "My own voice.")
    # seeded: the page plays what it gets, and unseeded the tiny random model's noise decided how long (2.7
    # to 11.4 s for this test's call); seeds 1 to 5 gave 1.0 to 4.9 s of audio, this one 1.0
    page.fill("#speak-seed", "2")
    with page.expect_request(is_speech_post) as sent:
        status = speak(page)
    assert status.startswith("Done"), page.inner_text("#speak-error")
    assert speech_request_body(sent.value)["voice"] == "browser_voice"
    assert heard(page)[1] > 0

    page.click("#tab-voices")
    row = page.locator('#voices-table tr[data-voice="browser_voice"]')
    assert row.is_visible()

    # Renaming goes through the API: a blank name shows its error, a good one reaches the picker.
    page.once("dialog", lambda dialog: dialog.accept("   "))
    page.click('button[aria-label="Rename browser_voice"]')
    wait_for_text(page, "#voices-status", "^Not renamed")
    assert "name: a non-blank string is required" in page.inner_text("#voices-error")
    page.once("dialog", lambda dialog: dialog.accept("Narrator from the browser"))
    page.click('button[aria-label="Rename browser_voice"]')
    wait_for_text(page, "#voices-status", '^Renamed browser_voice to "Narrator from the browser"')
    assert row.locator("th").inner_text() == "Narrator from the browser (browser_voice)"
    assert page.inner_text("#voices-error") == ""
    picked = page.locator('#speak-voice option[value="browser_voice"]')
    assert picked.inner_text() == "Narrator from the browser (browser_voice)"
    shown = httpx.get(f"{voxcpm2_server}/v1/audio/voices/browser_voice").json()
    assert shown["name"] == "Narrator from the browser"


def test_a_silent_clip_shows_the_apis_own_error(page, voxcpm2_server):
    silence = np.zeros(48000, np.float32)
    refusals = [
        httpx.post(
            f"{voxcpm2_server}/v1/audio/voices",
            data={"name": "silent_direct", "consent": "true"},
            files={"audio": ("silent.wav", wav_bytes(silence), "audio/wav")},
        ),
        httpx.post(
            f"{voxcpm2_server}/v1/audio/speech",
            data={"input": "Silence.", "response_format": "pcm"},
            files={"custom_voice_file": ("silent.wav", wav_bytes(silence), "audio/wav")},
        ),
    ]
    assert [refusal.status_code for refusal in refusals] == [400, 400]
    save_message, once_message = (refusal.json()["error"]["message"] for refusal in refusals)

    open_playground(page, voxcpm2_server)
    page.click("#tab-clone")
    page.set_input_files("#clone-file", files=[clip_file(silence, "silent.wav")])
    page.check("#clone-consent")
    page.fill("#clone-name", "silent_voice")
    page.click("#clone-save")
    page.wait_for_selector("#clone-error", state="visible")
    assert save_message in page.inner_text("#clone-error")
    assert "400" in page.inner_text("#clone-error")

    page.click("#clone-speak")  # a one-off clone with it is refused as the API refuses it
    wait_for_text(page, "#clone-status", "^Failed")
    assert once_message in page.inner_text("#clone-error")


def test_a_recorded_clip_speaks_once(page, voxcpm2_server):
    open_playground(page, voxcpm2_server)
    page.click("#tab-clone")
    page.click("#clone-record")  # Chromium's fake microphone
    page.wait_for_timeout(2000)
    page.click("#clone-record-stop")
    wait_for_text(page, "#clone-clip", "^Recording of")
    page.check("#clone-consent")
    page.fill("#clone-text", "Recorded.")
    with page.expect_request(is_speech_post) as sent:
        page.click("#clone-speak")
    assert wait_for_text(page, "#clone-status", "^(Spoken|Failed)").startswith("Spoken"), page.inner_text(
        "#clone-error"
    )
    assert sent.value.headers["content-type"].startswith("multipart/form-data")  # the clip, uploaded
    wait_for_sound(page)


def test_a_voice_designed_from_a_description_is_listed_and_plays_a_sample(page, voxcpm2_server):
    open_playground(page, voxcpm2_server)
    page.click("#tab-voices")
    page.fill("#design-name", "Calm narrator")  # not an id: the voice gets one (voice_...)
    page.fill("#design-prompt", "a calm, unhurried narrator")
    with page.expect_response(
        lambda r: r.url.endswith("/v1/audio/voices") and r.request.method == "POST"
    ) as made:
        page.click("#design-button")
    voice_id = made.value.json()["id"]
    assert voice_id.startswith("voice_")
    wait_for_text(page, "#voices-status", f'^Designed "{voice_id}"')

    row = page.locator(f'#voices-table tr[data-voice="{voice_id}"]')
    assert "Calm narrator" in row.inner_text() and "designed" in row.inner_text()
    with page.expect_request(is_speech_post) as sent:
        row.get_by_role("button", name=f"Play sample {voice_id}").click()
    assert speech_request_body(sent.value)["voice"] == voice_id
    wait_for_text(page, "#voices-status", f"^Sample of {voice_id}")
    wait_for_sound(page)
    assert page.locator(f'#speak-voice option[value="{voice_id}"]').count() == 1  # and in the picker

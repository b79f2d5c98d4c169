"""The playground against `polyvox serve` with API keys on, in headless Chromium: the page loads without
a key and says one is needed, works with the key (HTTP and WebSocket, the key in session storage only
and never in a URL) on the embedded voice, and changing voices needs the admin key (on VoxCPM2, which
can store a voice)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from helpers.serve_process import polyvox_serve
from voices.clips import wav_clip
from web.conftest import serve_flags
from web.playground import is_speech_post, open_playground, speak, wait_for_sound, wait_for_text

USER_KEY = "user/key+1="  # characters a WebSocket subprotocol cannot carry as they are
ADMIN_KEY = "admin-key-2"


KEYS = ("--api-keys", USER_KEY, "--admin-api-keys", ADMIN_KEY)


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory) -> Iterator[str]:
    pytest.importorskip("polyvox.backends.embedded")
    tmp = tmp_path_factory.mktemp("keys")
    with polyvox_serve(*serve_flags(tmp, "--no-cache-enabled", *KEYS)) as (_, url):
        yield url


@pytest.fixture(scope="module")
def keyed_voxcpm2_server(tmp_path_factory) -> Iterator[str]:
    """A tiny random VoxCPM2 with keys: an engine that clones, so a voice can be uploaded."""
    tmp = tmp_path_factory.mktemp("keys-voxcpm2")
    flags = serve_flags(tmp, "--random-weights", "tiny", "--device", "cpu", "--no-cache-enabled", *KEYS)
    with polyvox_serve(*flags) as (_, url):
        yield url


def test_without_a_key_the_page_loads_and_says_one_is_needed(page, keyed_server):
    open_playground(page, keyed_server)
    assert "requires an API key" in page.inner_text("#notice")
    assert page.evaluate("document.activeElement.id") == "api-key"
    # Nothing to speak with yet: Speak is off, and Voice and Model say why instead of standing empty.
    assert page.is_disabled("#speak-button")
    assert page.inner_text("#speak-status") == "Enter the API key first."
    for select in ("#speak-voice", "#speak-model"):
        assert page.locator(f"{select} option").all_inner_texts() == ["enter the API key first"], select
    # VoxCPM2's controls are not shown for an engine the page does not know yet (it is the embedded one).
    assert page.evaluate("[...document.querySelectorAll('.voxcpm')].every((e) => e.offsetParent === null)")
    assert page.is_hidden("#design-note")

    page.fill("#api-key", USER_KEY)
    page.click("#key-form button[type=submit]")
    page.wait_for_function("!document.getElementById('speak-button').disabled")
    assert page.input_value("#speak-voice") == "alloy" and page.input_value("#speak-model")
    assert page.inner_text("#speak-status") == ""
    assert page.evaluate("[...document.querySelectorAll('.voxcpm')].every((e) => e.offsetParent === null)")


def test_with_the_key_it_speaks_over_http_and_websocket(page, keyed_server):
    open_playground(page, keyed_server, key=USER_KEY)
    assert page.is_hidden("#notice")
    assert page.evaluate("sessionStorage.getItem('polyvox.apiKey')") == USER_KEY
    assert page.evaluate("localStorage.length") == 0
    with page.expect_request(is_speech_post) as sent:
        assert speak(page).startswith("Done"), page.inner_text("#speak-error")
    assert sent.value.headers["authorization"] == f"Bearer {USER_KEY}"

    sockets = []
    page.on("websocket", lambda socket: sockets.append(socket))
    page.select_option("#speak-transport", "websocket")
    page.select_option("#speak-voice", "sage")
    page.fill("#speak-input", "Over the socket.")
    assert speak(page).startswith("Done"), page.inner_text("#speak-error")
    wait_for_sound(page)
    assert USER_KEY not in sockets[0].url
    assert float(page.inner_text("#speak-duration").split()[0]) > 0.3


def test_a_websocket_config_carries_the_controls(page, keyed_server):
    open_playground(page, keyed_server, key=USER_KEY)
    frames: list[str] = []
    page.on("websocket", lambda socket: socket.on("framesent", lambda frame: frames.append(frame)))
    page.select_option("#speak-transport", "websocket")
    page.select_option("#speak-voice", "coral")
    page.select_option("#speak-sample-rate", "22050")
    page.fill("#speak-seed", "5")
    page.fill("#speak-input", "Configured.")
    assert speak(page).startswith("Done"), page.inner_text("#speak-error")
    messages = [json.loads(frame if isinstance(frame, str) else frame["payload"]) for frame in frames]
    config, text, end = messages[:3]
    assert config == {
        "type": "config",
        "model": "polyvox-embedded",
        "voice": "coral",
        "speed": 1,
        "sample_rate": 22050,
        "seed": 5,
        "response_format": "pcm",
    }
    assert text == {"type": "text", "text": "Configured."} and end == {"type": "end"}


def test_changing_voices_needs_the_admin_key(page, keyed_voxcpm2_server):
    open_playground(page, keyed_voxcpm2_server, key=USER_KEY)
    page.click("#tab-voices")
    page.fill("#upload-name", "keyed_voice")
    page.set_input_files(
        "#upload-file", files=[{"name": "v.wav", "mimeType": "audio/wav", "buffer": wav_clip(2.0)}]
    )
    page.check("#upload-consent")
    page.click("#upload-button")
    page.wait_for_selector("#voices-error", state="visible")
    assert "needs an admin API key" in page.inner_text("#voices-error")
    assert "403" in page.inner_text("#voices-error")

    page.fill("#api-key", ADMIN_KEY)
    page.click("#key-form button[type=submit]")
    page.click("#upload-button")
    wait_for_text(page, "#voices-status", '^Uploaded "keyed_voice"')
    row = page.locator('#voices-table tr[data-voice="keyed_voice"]')
    assert row.is_visible()

    page.fill("#api-key", USER_KEY)
    page.click("#key-form button[type=submit]")
    page.on("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete keyed_voice").click()
    wait_for_text(page, "#voices-error", "needs an admin API key")

    page.fill("#api-key", ADMIN_KEY)
    page.click("#key-form button[type=submit]")
    row.get_by_role("button", name="Delete keyed_voice").click()
    wait_for_text(page, "#voices-status", "^Deleted keyed_voice")
    assert page.locator('#voices-table tr[data-voice="keyed_voice"]').count() == 0

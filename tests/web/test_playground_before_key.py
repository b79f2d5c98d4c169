"""Before a key is entered, on a server that needs one, the page does not pretend to be ready: Speak is
off and says to enter the key, Voice and Model say the same instead of standing empty, and no engine's
own controls (VoxCPM2's) are shown for an engine the page does not know yet. In headless Chromium
against the embedded voice, its API routes answering 401 until the page sends a key, as a keyed
server's do (tests/web/test_playground_keys.py checks the same against `polyvox serve --api-keys`)."""

from __future__ import annotations

import json

from web.playground import open_playground

KEY = "the-key"
API_ROUTES = ("**/ui/config", "**/v1/models", "**/ui/voices")
UNAUTHORIZED = json.dumps(
    {
        "error": {
            "message": "missing or incorrect API key",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
)


def needs_a_key(route):
    if route.request.headers.get("authorization") == f"Bearer {KEY}":
        route.continue_()
    else:
        route.fulfill(status=401, content_type="application/json", body=UNAUTHORIZED)


HIDDEN_VOXCPM2_CONTROLS = "[...document.querySelectorAll('.voxcpm')].every((e) => e.offsetParent === null)"


def test_before_a_key_speak_is_off_and_says_to_enter_one(page, embedded_server):
    for pattern in API_ROUTES:
        page.route(pattern, needs_a_key)
    open_playground(page, embedded_server)
    assert "requires an API key" in page.inner_text("#notice")
    assert page.is_disabled("#speak-button")
    assert page.inner_text("#speak-status") == "Enter the API key first."
    for select in ("#speak-voice", "#speak-model"):
        assert page.locator(f"{select} option").all_inner_texts() == ["enter the API key first"], select
    assert page.evaluate(HIDDEN_VOXCPM2_CONTROLS)
    assert page.is_hidden("#design-note")
    page.keyboard.press("Control+Enter")  # the shortcut does not speak either
    assert page.inner_text("#speak-status") == "Enter the API key first."

    page.fill("#api-key", KEY)
    page.click("#key-form button[type=submit]")
    page.wait_for_function("!document.getElementById('speak-button').disabled")
    assert page.input_value("#speak-voice") == "alloy" and page.input_value("#speak-model")
    assert page.inner_text("#speak-status") == ""
    assert page.evaluate(HIDDEN_VOXCPM2_CONTROLS)  # the embedded voice has none of them
    assert page.is_visible("#design-note")

    page.click("#key-forget")  # and locked again once the key is forgotten
    page.wait_for_function("document.getElementById('speak-button').disabled")
    assert page.inner_text("#speak-status") == "Enter the API key first."

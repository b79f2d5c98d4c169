"""The playground's page on the embedded voice, in headless Chromium at a desktop's and a phone's width:
no select cuts an option short, the panels line up with the header, one request lists every voice with
what the page shows of it, each voice says its delivery, and Clone and Upload are disabled with the
reason (the embedded voice cannot clone)."""

from __future__ import annotations

import pytest

from polyvox.backends.embedded import VOICE_STYLES
from web.playground import cut_short_selects, open_playground, right_edges

WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
VOICE_REQUEST_PATHS = ("/v1/audio/voices", "/v1/voices", "/ui/voices")


@pytest.mark.parametrize("screen", WIDTHS)
def test_no_select_cuts_an_option_short_and_every_panel_ends_where_the_header_does(
    page, embedded_server, artifacts, screen
):
    width, height = WIDTHS[screen]
    page.set_viewport_size({"width": width, "height": height})
    open_playground(page, embedded_server)
    page.wait_for_function("document.getElementById('speak-sample-rate').options[0].text.includes('(')")
    assert page.locator("#speak-sample-rate option").first.inner_text() == "server default (24000)"
    for tab in ("speak", "clone", "voices", "server", "code"):
        page.click(f"#tab-{tab}")
        assert cut_short_selects(page) == [], f"{tab} tab at {width} px"
        header, panel = right_edges(page)
        assert panel == pytest.approx(header, abs=3), f"{tab} tab at {width} px"
    page.click("#tab-speak")
    page.screenshot(path=str(artifacts / f"embedded-{screen}-speak.png"), full_page=True)


def test_one_request_lists_every_voice_with_its_details(page, embedded_server):
    voice_requests = []
    page.on(
        "request",
        lambda request: (
            voice_requests.append(request.url) if any(p in request.url for p in VOICE_REQUEST_PATHS) else None
        ),
    )
    open_playground(page, embedded_server)
    page.click("#tab-voices")
    page.wait_for_selector('#voices-table tr[data-voice="cedar"]')
    assert voice_requests == [f"{embedded_server}/ui/voices"]


def test_each_embedded_voice_says_its_delivery(page, embedded_server):
    open_playground(page, embedded_server)
    page.click("#tab-voices")
    about = {
        voice: page.locator(f'#voices-table tr[data-voice="{voice}"] td').nth(1).inner_text()
        for voice in VOICE_STYLES
    }
    assert len(set(about.values())) == len(VOICE_STYLES), about  # no two voices say the same
    for voice, text in about.items():
        assert f"{VOICE_STYLES[voice].name} delivery" in text.lower(), (voice, text)
    page.click("#tab-speak")
    page.select_option("#speak-voice", "onyx")
    assert page.inner_text("#voice-description") == about["onyx"]


def test_clone_and_upload_are_disabled_and_say_why(page, embedded_server):
    open_playground(page, embedded_server)
    page.click("#tab-clone")
    reason = page.inner_text("#clone-note")
    assert page.is_visible("#clone-note") and "cannot clone" in reason and "embedded" in reason
    for control in ("#clone-file", "#clone-record", "#clone-consent", "#clone-speak", "#clone-save"):
        assert page.is_disabled(control), control
    page.click("#tab-voices")
    assert page.is_visible("#upload-note") and page.inner_text("#upload-note") == reason
    for control in ("#upload-name", "#upload-file", "#upload-button"):
        assert page.is_disabled(control), control
    assert page.is_enabled('button[aria-label="Play sample alloy"]')  # speaking the voices still works

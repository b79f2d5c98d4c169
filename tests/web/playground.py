"""Driving the playground page as a user does, and reading what it shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

TABS = ("speak", "clone", "voices", "server", "code")


def open_playground(page, url: str, key: str | None = None, path: str = "/") -> None:
    """Load the page; with `key`, enter it as a user does. Waits until the server's voices are listed
    (its config has arrived before them) or the page has said why not."""
    page.goto(url + path)
    if key is not None:
        page.fill("#api-key", key)
        page.click("#key-form button[type=submit]")
    # the page's own markup holds a "loading…" option (value ""): wait for a voice the server listed
    page.wait_for_function(
        "document.querySelector('#speak-voice option:not([value=\"\"])') !== null"
        " || !document.getElementById('notice').hidden"
    )


def wait_for_text(page, selector: str, pattern: str) -> str:
    """Wait until the element's text matches `pattern` (a regular expression); returns the text. Past the
    page's timeout the failure says what the element, and the page's error lines, said instead."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # the browser tests' own import

    try:
        page.wait_for_function(
            "([selector, pattern]) => new RegExp(pattern).test(document.querySelector(selector).textContent)",
            arg=[selector, pattern],
        )
    except PlaywrightTimeout:
        shown = page.evaluate(
            "(selector) => [selector, ...[...document.querySelectorAll('[id$=-error], #notice')]"
            ".filter((e) => e.id !== selector.slice(1)).map((e) => '#' + e.id)]"
            ".map((s) => s + ': ' + JSON.stringify(document.querySelector(s).textContent))",
            selector,
        )
        shows = "; ".join(shown)
        raise AssertionError(f"{selector} never matched {pattern!r}; the page shows {shows}") from None
    return page.inner_text(selector)


def speak(page) -> str:
    """Press Speak and wait until the page reports the end (playback included) or an error; returns
    the status line."""
    page.click("#speak-button")
    return wait_for_text(page, "#speak-status", r"^(Done|Failed|Stopped)")


def seconds(text: str) -> float:
    """A figure the page shows as `1.23 s`."""
    match = re.search(r"([\d.]+) s", text)
    assert match, f"no seconds in {text!r}"
    return float(match.group(1))


def heard(page) -> tuple[float, float]:
    """Seconds of audio that went through the page's audio graph for the last utterance, and its peak."""
    meter = page.locator("#level-meter")
    return float(meter.get_attribute("data-heard-seconds")), float(meter.get_attribute("data-peak"))


def wait_for_sound(page) -> None:
    """Wait until the page's audio graph has carried sound (a peak above zero) for this utterance."""
    page.wait_for_function("Number(document.getElementById('level-meter').dataset.peak) > 0")


def speech_request_body(request) -> dict:
    """The JSON body of a captured `POST /v1/audio/speech`."""
    return json.loads(request.post_data)


def is_speech_post(request) -> bool:
    return request.method == "POST" and request.url.endswith("/v1/audio/speech")


def screenshot_tabs(page, directory: Path, prefix: str) -> list[Path]:
    """A full-page screenshot of each tab, as a test artefact."""
    shots = []
    for tab in TABS:
        page.click(f"#tab-{tab}")
        page.wait_for_timeout(300)  # the Server tab's first refresh, the Code tab's render
        path = directory / f"{prefix}-{tab}.png"
        page.screenshot(path=str(path), full_page=True)
        shots.append(path)
    page.click("#tab-speak")
    return shots


# For each visible select: its width, and the width Chromium gives the same select left to size itself
# (an auto-width select is as wide as its longest option, arrow included). Narrower cuts an option short.
SELECT_WIDTHS = """() => [...document.querySelectorAll("select")]
  .filter((select) => select.offsetParent !== null)
  .map((select) => {
    const free = select.cloneNode(true);
    free.removeAttribute("id");
    free.style.cssText = "position: absolute; visibility: hidden; width: auto; min-width: 0; max-width: none";
    select.parentElement.append(free);
    const needed = free.getBoundingClientRect().width;
    free.remove();
    return { id: select.id, width: select.getBoundingClientRect().width, needed };
  })"""


def cut_short_selects(page) -> list[dict]:
    """The visible selects too narrow for their longest option: [{id, width, needed}]."""
    return [s for s in page.evaluate(SELECT_WIDTHS) if s["width"] < s["needed"] - 0.5]


def right_edges(page) -> tuple[float, float]:
    """The right edge of the header's content (the API-key form) and of the tab panel shown."""
    return page.evaluate(
        """() => [
          document.getElementById("key-form").getBoundingClientRect().right,
          document.querySelector('[role="tabpanel"]:not([hidden])').getBoundingClientRect().right,
        ]"""
    )

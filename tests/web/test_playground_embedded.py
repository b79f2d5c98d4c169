"""The playground against `polyvox serve` with the embedded voice, in headless Chromium: speaking plays
the stream through the page's audio graph with the right figures, every control reaches the request,
the download is the chosen format, and the Code tab's snippets run; the Server tab shows the prefix-cache
hit rate over every engine rank."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from helpers.audio import decode
from web.playground import (
    heard,
    is_speech_post,
    open_playground,
    screenshot_tabs,
    seconds,
    speak,
    speech_request_body,
    wait_for_text,
)


def test_speak_plays_the_stream_and_shows_first_audio_and_its_duration(page, embedded_server, artifacts):
    open_playground(page, embedded_server)
    page.fill("#speak-input", "Hello from the browser.")
    page.select_option("#speak-voice", "nova")
    with page.expect_response(lambda response: is_speech_post(response.request)) as answer:
        status = speak(page)
    assert status.startswith("Done"), page.inner_text("#speak-error")

    response = answer.value
    assert speech_request_body(response.request)["voice"] == "nova"
    assert response.headers["content-type"].startswith("audio/pcm")
    pcm = response.body()
    duration = len(pcm) / 2 / 24000
    assert duration > 0.5
    assert seconds(page.inner_text("#speak-duration")) == pytest.approx(duration, abs=0.006)
    assert seconds(page.inner_text("#speak-ttfa")) > 0
    assert float(page.inner_text("#speak-rtf")) > 0
    heard_s, peak = heard(page)
    assert peak > 0.01  # sound, not silence, reached the output
    assert duration - 0.05 <= heard_s <= duration + 0.5  # all of it went through the graph, once

    screenshot_tabs(page, artifacts, "embedded")


def test_tabs_and_speaking_work_from_the_keyboard(page, embedded_server):
    open_playground(page, embedded_server, path="/ui")
    page.focus("#tab-speak")
    page.keyboard.press("ArrowRight")
    assert page.is_visible("#panel-clone") and not page.is_visible("#panel-speak")
    page.keyboard.press("End")
    assert page.is_visible("#panel-code")
    page.keyboard.press("Home")
    page.fill("#speak-input", "Keys.")
    with page.expect_request(is_speech_post) as sent:
        page.press("#speak-input", "Control+Enter")
    assert speech_request_body(sent.value)["input"] == "Keys."
    assert wait_for_text(page, "#speak-status", r"^(Done|Failed)").startswith("Done")

    page.fill("#speak-input", "A long story, told slowly. " * 6)
    page.press("#speak-input", "Control+Enter")
    wait_for_text(page, "#speak-status", "^Generated in")  # all of it received, much still to play
    page.focus("#stop-button")
    page.keyboard.press("Enter")
    assert wait_for_text(page, "#speak-status", r"^(Stopped|Done|Failed)") == "Stopped."
    assert page.is_hidden("#speak-error")


def test_every_control_reaches_the_request_and_the_download_is_the_chosen_format(page, embedded_server):
    open_playground(page, embedded_server)
    sent = []
    page.on("request", lambda request: sent.append(request) if is_speech_post(request) else None)
    page.fill("#speak-input", "Call me at 5 pm.")
    page.select_option("#speak-model", "tts-1-hd")
    page.select_option("#speak-voice", "onyx")
    page.focus("#speak-speed")
    for _ in range(10):  # 1.00 -> 1.50 in steps of 0.05, as a keyboard user does
        page.keyboard.press("ArrowRight")
    page.focus("#speak-pitch")
    for _ in range(3):  # 0 -> -3 semitones
        page.keyboard.press("ArrowLeft")
    assert page.inner_text("#speak-pitch-value") == "-3 semitones"
    # the embedded voice has one delivery: the server offers neutral alone
    assert page.eval_on_selector_all("#speak-emotion option", "o => o.map(e => e.value)") == ["", "neutral"]
    page.select_option("#speak-emotion", "neutral")
    page.select_option("#speak-format", "flac")
    page.select_option("#speak-sample-rate", "16000")
    page.fill("#speak-seed", "42")
    page.select_option("#speak-normalize", "false")
    assert speak(page).startswith("Done"), page.inner_text("#speak-error")

    played = speech_request_body(sent[-1])
    assert played == {
        "model": "tts-1-hd",
        "input": "Call me at 5 pm.",
        "voice": "onyx",
        "speed": 1.5,
        "pitch": -3,
        "emotion": "neutral",
        "sample_rate": 16000,
        "seed": 42,
        "normalize": False,
        "response_format": "pcm",  # playback streams PCM...
        "stream_format": "audio",
    }
    shown = seconds(page.inner_text("#speak-duration"))

    with page.expect_download() as download:
        page.click("#download-button")
    fetched = speech_request_body(sent[-1])
    expected = {**played, "response_format": "flac"}  # ...the download asks for the chosen format
    del expected["stream_format"]
    assert fetched == expected
    assert download.value.suggested_filename == "speech.flac"
    samples, rate = decode(download.value.path().read_bytes())
    assert rate == 16000
    # The cache is off: the same request, synthesised again. piper's duration noise (noise_w) is not
    # seeded, so a second synthesis of the same sentence may differ by a few frames (0.08 s seen).
    assert samples.size / rate == pytest.approx(shown, rel=0.15)


def test_code_tab_snippets_run_and_speak_the_current_settings(page, embedded_server, tmp_path):
    open_playground(page, embedded_server)
    page.fill("#speak-input", "Straight from the code tab.")
    page.select_option("#speak-voice", "echo")
    page.select_option("#speak-format", "wav")
    page.fill("#speak-seed", "3")
    page.click("#tab-code")
    python = page.inner_text("#code-python")
    assert 'extra_body={"seed": 3}' in python
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click('button[data-copy="code-python"]')
    wait_for_text(page, "#code-status", "^Copied")
    assert page.evaluate("navigator.clipboard.readText()") == python
    env = {k: v for k, v in os.environ.items() if k != "POLYVOX_API_KEY"}
    subprocess.run([sys.executable, "-c", python], cwd=tmp_path, env=env, check=True, timeout=120)
    samples, _ = decode((tmp_path / "speech.wav").read_bytes())
    assert samples.size > 0

    if shutil.which("curl"):
        (tmp_path / "speech.wav").unlink()
        subprocess.run(["bash", "-c", page.inner_text("#code-curl")], cwd=tmp_path, check=True, timeout=120)
        samples, _ = decode((tmp_path / "speech.wav").read_bytes())
        assert samples.size > 0


def test_on_a_phone_in_dark_mode_every_tab_fits_the_screen(page, embedded_server, artifacts):
    page.set_viewport_size({"width": 390, "height": 844})
    page.emulate_media(color_scheme="dark")
    open_playground(page, embedded_server)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    red, green, blue = (int(part) for part in background[background.index("(") + 1 : -1].split(",")[:3])
    assert red + green + blue < 150, background  # the dark theme followed the system
    for tab in ("speak", "clone", "voices", "server", "code"):
        page.click(f"#tab-{tab}")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the {tab} tab is wider than a phone by {overflow} px"
        page.screenshot(path=str(artifacts / f"phone-dark-{tab}.png"), full_page=True)


# What /metrics says of two data-parallel engine ranks whose prefix caches did differently well.
TWO_RANKS = """\
# TYPE polyvox_engine_prefix_cache_queries_total counter
polyvox_engine_prefix_cache_queries_total{rank="0"} 100.0
polyvox_engine_prefix_cache_queries_total{rank="1"} 300.0
# TYPE polyvox_engine_prefix_cache_hits_total counter
polyvox_engine_prefix_cache_hits_total{rank="0"} 90.0
polyvox_engine_prefix_cache_hits_total{rank="1"} 150.0
# TYPE polyvox_engine_prefix_cache_hit_rate gauge
polyvox_engine_prefix_cache_hit_rate{rank="0"} 0.9
polyvox_engine_prefix_cache_hit_rate{rank="1"} 0.5
# TYPE polyvox_engine_batch_size gauge
polyvox_engine_batch_size{rank="0"} 6.0
polyvox_engine_batch_size{rank="1"} 2.0
# TYPE polyvox_engine_batch_size_mean gauge
polyvox_engine_batch_size_mean{rank="0"} 8.0
polyvox_engine_batch_size_mean{rank="1"} 2.0
# TYPE polyvox_engine_steps_total counter
polyvox_engine_steps_total{rank="0"} 10.0
polyvox_engine_steps_total{rank="1"} 30.0
# TYPE polyvox_engine_patches_total counter
polyvox_engine_patches_total{rank="0"} 80.0
polyvox_engine_patches_total{rank="1"} 60.0
"""


def test_the_server_tab_shows_the_prefix_cache_hit_rate_over_every_rank(page, embedded_server):
    """All the ranks' hits over all their lookups (240 of 400: 60 %), not their rates added up (140 %);
    the batch now (6 + 2) and its mean over every rank's steps (140 patches in 40 steps: 3.5, not the
    ranks' means added up, 10). The page is given a two-rank /metrics: the embedded voice has no engine
    ranks of its own."""
    page.route(
        "**/metrics", lambda route: route.fulfill(status=200, content_type="text/plain", body=TWO_RANKS)
    )
    open_playground(page, embedded_server)
    page.click("#tab-server")
    assert wait_for_text(page, "#server-prefix", "blocks") == "60.0 % of 400 blocks"
    assert page.text_content("#server-batch") == "8 / 3.5"

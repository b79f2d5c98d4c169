"""The playground in a real browser: headless Chromium (the system's, /usr/bin/chromium) driven by
Playwright against `polyvox serve` on loopback. One browser for the files of this directory that run
one after another in a worker (package scope: about 0.9 s of CPU a launch, the driver's and Chromium's);
each test gets a fresh context (its own session storage and cookies) and a page that records uncaught
script errors."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.serve_process import polyvox_serve

CHROMIUM = Path(os.environ.get("POLYVOX_TEST_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).parent / "artifacts"  # screenshots (gitignored)
TIMEOUT_MS = 120_000  # a speech request on two shared cores, first-use voice freeze included

CHROMIUM_FLAGS = (
    "--autoplay-policy=no-user-gesture-required",
    "--use-fake-device-for-media-stream",  # a synthetic microphone for MediaRecorder
    "--use-fake-ui-for-media-stream",  # grant it without a prompt
)


@pytest.fixture(scope="package")
def browser() -> Iterator:
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install the Debian packages chromium and chromium-driver")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the test extra's playwright is missing")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_FLAGS))
        yield browser
        browser.close()


@pytest.fixture
def page(browser) -> Iterator:
    """A page in a fresh context (own session storage, downloads allowed); the test fails if any of
    its scripts raised an uncaught error."""
    context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    script_errors: list[str] = []
    page.on("pageerror", lambda error: script_errors.append(str(error)))
    yield page
    context.close()
    assert not script_errors, f"the page's scripts failed: {script_errors}"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def serve_flags(tmp: Path, *flags: str) -> tuple[str, ...]:
    """`polyvox serve` flags for a browser test: its own voices directory, quiet logs."""
    return ("--voices-dir", str(tmp / "voices"), "--log-level", "warning", *flags)


@pytest.fixture(scope="session")
def embedded_server(tmp_path_factory) -> Iterator[str]:
    """`polyvox serve` with the embedded voice (audio cache off), shared by the modules that use it: it
    stores nothing (the embedded voice cannot clone)."""
    pytest.importorskip("polyvox.backends.embedded")
    tmp = tmp_path_factory.mktemp("embedded")
    with polyvox_serve(*serve_flags(tmp, "--no-cache-enabled")) as (_, url):
        yield url


@pytest.fixture(scope="module")
def voxcpm2_server(tmp_path_factory) -> Iterator[str]:
    """`polyvox serve --random-weights tiny --device cpu`, the audio cache on in a temporary directory."""
    tmp = tmp_path_factory.mktemp("voxcpm2")
    cache = ("--cache-enabled", "--cache-dir", str(tmp / "cache"))
    flags = ("--random-weights", "tiny", "--device", "cpu", *cache)
    with polyvox_serve(*serve_flags(tmp, *flags)) as (_, url):
        yield url
    shutil.rmtree(tmp, ignore_errors=True)

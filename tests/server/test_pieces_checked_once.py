"""The pieces a request is checked on are the pieces it is spoken as: after the lexicon and
normalisation, not before. An engine that cannot say a word that normalisation writes out refuses the
request with a 422 before any audio is sent (not a stream cut at that piece), and a symbol it cannot
say that normalisation writes out as words is no reason to refuse. A real server on loopback, the fake
engine behind the real text front end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import httpx
import pytest

from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

SPEECH = "/v1/audio/speech"
# Two pieces (max_piece_chars): the number is in the second, so it is spoken after audio has started.
TEXT = "The first sentence is spoken without any trouble at all. Then it counts 5 apples."


@pytest.fixture
def serve_refusing() -> Iterator[Callable[[str], str]]:
    """`serve_refusing(marker)`: a server whose engine refuses any piece holding `marker` (FakeBackend's
    reject marker), behind the text front end."""
    with ExitStack() as stack:

        def start(marker: str) -> str:
            settings = Settings(max_piece_chars=60, normalize=True)
            backend = FakeBackend(reject_marker=marker)
            return stack.enter_context(
                running_server(create_app(settings, backend, build_text_pipeline(settings, backend)))
            )

        yield start


def test_a_word_normalisation_writes_out_that_the_engine_refuses_is_a_422_before_any_audio(
    serve_refusing,
) -> None:
    url = serve_refusing("five")
    with httpx.stream("POST", f"{url}{SPEECH}", json={"input": TEXT, "response_format": "pcm"}) as response:
        response.read()
    assert response.status_code == 422, response.status_code
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("input", "unspeakable")


def test_a_symbol_normalisation_writes_out_as_words_is_spoken(serve_refusing) -> None:
    url = serve_refusing("5")
    response = httpx.post(f"{url}{SPEECH}", json={"input": TEXT, "response_format": "pcm"}, timeout=60)
    assert response.status_code == 200, response.text
    assert len(response.content) > 0

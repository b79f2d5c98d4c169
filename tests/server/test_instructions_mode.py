"""`instructions_mode`: openai-agents sends a fixed directive as `instructions` on every request, which
VoxCPM2 would take as a voice design. `design` (the default) lets instructions shape the voice;
`ignore` drops them before the engine and the cache key; `instructions_mode_by_voice` makes
exceptions per voice.

openai-agents itself is not installed in the test environment (it pulls mcp, cryptography and an
older `websockets` than the server runs on): `agents_request` sends exactly what its
`OpenAITTSModel.run` sends (openai-agents 0.24.0): `audio.speech.with_streaming_response.create`
with model gpt-4o-mini-tts, voice ash, `response_format="pcm"`, speed omitted and
`extra_body={"instructions": TTSModelSettings().instructions}`, read with `iter_bytes(1024)`.
Served by a tiny random-weight VoxCPM2 on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import httpx
import numpy as np
import openai
import pytest

from helpers.backends import BackendWrapper
from helpers.server import running_server
from polyvox.backends.base import SynthesisRequest
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.core.config import BatchingConfig
from polyvox.models.voxcpm2.loaded_model import VoxCPM2
from polyvox.server.app import create_app
from polyvox.settings import Settings

# openai-agents' TTSModelSettings.instructions default, as it sends it
AGENTS_INSTRUCTIONS = (
    "You will receive partial sentences. Do not complete the sentence just read out the text."
)
TEXT = "Your order has shipped."
PATCHES = 3


class Recording(BackendWrapper):
    """The real VoxCPM2 engine at a fixed length (random weights stop anywhere), noting the
    instructions each generation of TEXT was given."""

    def __init__(self, inner):
        super().__init__(inner)
        self.instructions: list[str | None] = []

    async def speak(self, request: SynthesisRequest) -> AsyncIterator[np.ndarray]:
        if request.text == TEXT:
            self.instructions.append(request.instructions)
        forced = replace(request, min_patches=PATCHES, max_patches=PATCHES)
        async with contextlib.aclosing(self.inner.generate(forced)) as chunks:
            async for chunk in chunks:
                yield chunk


@pytest.fixture(scope="module")
def tiny_model() -> VoxCPM2:
    return VoxCPM2.random("tiny", device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def serve(tiny_model) -> Iterator:
    """`serve(**settings)` -> (url, Recording engine) of a tiny VoxCPM2 server."""
    with contextlib.ExitStack() as stack:

        def start(**overrides) -> tuple[str, Recording]:
            settings = Settings(request_timeout_s=600, **overrides)
            backend = Recording(VoxCPMBackend(tiny_model, BatchingConfig(num_kv_blocks=256)))
            app = create_app(settings, backend, build_text_pipeline(settings, backend))
            return stack.enter_context(running_server(app)), backend

        yield start


def agents_request(url: str, instructions: str = AGENTS_INSTRUCTIONS) -> tuple[bytes, httpx.Headers]:
    """What openai-agents' OpenAITTSModel.run sends for one sentence, and the audio it reads back."""

    async def run() -> tuple[bytes, httpx.Headers]:
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="agents-key", max_retries=0)
        response = client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts",
            voice="ash",
            input=TEXT,
            response_format="pcm",
            speed=openai.omit,
            extra_body={"instructions": instructions},
        )
        async with response as stream:
            chunks = [chunk async for chunk in stream.iter_bytes(chunk_size=1024)]
            return b"".join(chunks), stream.headers

    return asyncio.run(run())


def plain_request(url: str, voice: str = "ash", **extra) -> openai.HttpxBinaryResponseContent:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
    return client.audio.speech.create(
        model="tts-1", voice=voice, input=TEXT, response_format="pcm", extra_body=extra or None
    )


def test_ignore_makes_the_agents_request_the_same_as_one_without_instructions(serve, tmp_path) -> None:
    url, backend = serve(instructions_mode="ignore", cache_enabled=True, cache_dir=str(tmp_path))
    plain = plain_request(url)
    assert plain.response.headers["X-Cache"] == "MISS"
    audio, headers = agents_request(url)
    assert headers["X-Cache"] == "HIT"  # same cache key: the directive never reached it
    assert audio == plain.content and len(audio) > 0
    assert backend.instructions and all(given is None for given in backend.instructions)


def test_design_by_default_turns_the_directive_into_a_voice_design(serve) -> None:
    url, backend = serve()
    audio, _ = agents_request(url)
    assert len(audio) > 0
    assert backend.instructions == [AGENTS_INSTRUCTIONS]
    # it changes the voice: same seed, with and without the directive
    without = [plain_request(url, seed=7).content for _ in range(2)]
    designed = plain_request(url, seed=7, instructions=AGENTS_INSTRUCTIONS).content
    assert without[0] == without[1]
    assert designed != without[0]


def test_per_voice_exceptions_go_both_ways(serve) -> None:
    url, backend = serve(instructions_mode="design", instructions_mode_by_voice={"ash": "ignore"})
    plain_request(url, voice="ash", instructions="A calm narrator.")
    plain_request(url, voice="nova", instructions="A calm narrator.")
    assert backend.instructions == [None, "A calm narrator."]
    url, backend = serve(instructions_mode="ignore", instructions_mode_by_voice={"nova": "design"})
    plain_request(url, voice="ash", instructions="A calm narrator.")
    plain_request(url, voice="nova", instructions="A calm narrator.")
    assert backend.instructions == [None, "A calm narrator."]


def test_the_per_voice_setting_reads_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("POLYVOX_INSTRUCTIONS_MODE_BY_VOICE", "narrator=ignore, guide=design")
    assert Settings().instructions_mode_by_voice == {"narrator": "ignore", "guide": "design"}
    monkeypatch.setenv("POLYVOX_INSTRUCTIONS_MODE_BY_VOICE", '{"narrator": "ignore"}')
    assert Settings().instructions_mode_by_voice == {"narrator": "ignore"}
    monkeypatch.setenv("POLYVOX_INSTRUCTIONS_MODE_BY_VOICE", "narrator=shout")
    with pytest.raises(ValueError):
        Settings()

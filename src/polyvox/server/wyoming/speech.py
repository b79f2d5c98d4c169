"""`WyomingSpeech`: the Wyoming port's door into the `SpeechService` that `/v1/audio/speech` and its
WebSocket use (text front end, admission, cache, metrics): an `Answer` per synthesis, its sentences
charged to the Wyoming caller's per-minute limits and recorded in its usage as HTTP requests are; each
answer is one of its key's `max_streams` while it lives."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from functools import partial

from wyoming.tts import SynthesizeVoice

from polyvox.audio import formats
from polyvox.server.errors import APIError
from polyvox.server.protocol import SpeechRequest, first_lone_surrogate
from polyvox.server.shared_state.fresh_reads import SharedCopy
from polyvox.server.speech.synthesis import SpeechService
from polyvox.server.tenancy.caller import Caller
from polyvox.server.tenancy.limits import STREAM_RENEW_S, StreamLease
from polyvox.server.tenancy.service import Tenancy
from polyvox.server.wyoming.answer import Answer
from polyvox.server.wyoming.caller import wyoming_caller
from polyvox.voices.registry import ResolvedVoice

log = logging.getLogger(__name__)

DEFAULT_VOICE: str = SpeechRequest.model_fields["voice"].default


class WyomingSpeech:
    def __init__(self, service: SpeechService, tenancy: Tenancy, copy: SharedCopy | None):
        """`copy`: the shared voices this server keeps in step with (Redis', or the voices directory)."""
        self.service = service
        self.tenancy = tenancy
        self.copy = copy

    async def caller(self) -> Caller:
        """The caller now, with the voices caught up with other servers' (as HTTP reads see them)."""
        if self.copy is not None:
            try:
                await self.copy.catch_up()
            except Exception as exc:  # the copy here serves, as it does while Redis is away
                log.warning("wyoming: voices not caught up: %s", exc)
        return await wyoming_caller(self.tenancy.keys, self.service.settings.wyoming_api_key_name)

    async def answer(self, voice: SynthesizeVoice | None) -> Answer:
        """An answer in `voice` (a voice name, a language, or neither: the default voice)."""
        caller = await self.caller()
        name = self._voice_name(voice)
        found = await self.service.voice(name, caller)  # once for the answer, each sentence speaks it
        rate = self.service.backend.info.sample_rate
        sample_rate = rate if 8000 <= rate <= 48000 else None  # the back end's own rate: no resampling
        _, out_rate = formats.resolve("pcm", sample_rate)
        template = SpeechRequest(input="Hello.", voice=name, response_format="pcm", sample_rate=sample_rate)
        speak = partial(self._speak, caller, template, found)
        lease = await self.tenancy.open_stream(caller)  # 429 past the key's max_streams
        release = None if lease is None else self._hold(lease)
        return Answer(speak, out_rate, ahead=1 + self.service.settings.piece_lookahead, release=release)

    def _hold(self, lease: StreamLease) -> Callable[[], Awaitable[None]]:
        """Renew the stream's lease while the answer lives; the call that closes it."""

        async def renew() -> None:
            while True:
                await asyncio.sleep(STREAM_RENEW_S)
                await self.tenancy.limiter.renew_stream(lease)

        renewing = asyncio.create_task(renew())

        async def release() -> None:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
            await self.tenancy.close_stream(lease)

        return release

    def _voice_name(self, voice: SynthesizeVoice | None) -> str:
        if voice is None or voice.name is not None:
            return voice.name if voice is not None and voice.name else DEFAULT_VOICE
        languages = self.service.backend.info.languages
        if voice.language is None or voice.language.split("-")[0].split("_")[0].lower() in languages:
            return DEFAULT_VOICE
        raise APIError(
            400,
            f"no voice speaks {voice.language!r}; this engine speaks {', '.join(languages)}",
            param="voice",
            code="unsupported_language",
        )

    async def _speak(
        self, caller: Caller, template: SpeechRequest, voice: ResolvedVoice, text: str
    ) -> AsyncGenerator[bytes, None]:
        """One sentence (or a whole text: the service splits it) as PCM, piece by piece as it is made."""
        if (at := first_lone_surrogate(text)) is not None:
            raise APIError(400, f"text: a lone UTF-16 surrogate at character {at}", param="text")
        service = self.service
        body = template.model_copy(update={"input": text})
        await self.tenancy.charge(caller, len(text))
        job = None
        try:
            with service.accept() as accepted_at:
                job = await service.prepare(body, voice, stream=True, accepted_at=accepted_at)
                await service.lookup(job)
                await service.admit(job)
            first, pieces = await service.opening(job)
            async with contextlib.aclosing(pieces):
                if first:
                    yield first
                async for piece in pieces:
                    yield piece
        finally:
            if job is not None:
                service.release(job)
                await self.tenancy.record(
                    caller, body.model, len(text), job.audio_seconds, job.cache_status == "HIT"
                )

"""The embedded CPU voice: piper-tts speaking the pinned `en_US-joe-medium` voice, sentence by sentence.

It is what polyvox serves with no VoxCPM2 checkpoint (model id `polyvox-embedded`). One English
speaker, 22,050 Hz (the voice config's rate), no cloning, no voice design:

- Voices: all 13 OpenAI names are the same speaker. They differ only in piper's noise scales,
  i.e. how lively the delivery is: calm (onyx, echo, sage, cedar, ash: noise 0.5/0.6), default
  (alloy, fable, verse, marin: the voice's own 0.667/0.8) and lively (nova, shimmer, coral, ballad:
  0.8/0.9). Any other voice name is refused.
- `instructions` are accepted and ignored: piper has no way to follow them. Of the emotions only
  `neutral` is spoken (each voice has one delivery); the others get a 422 naming the back end.
- Speed is native, through piper's `length_scale`, mapped by the measured duration curve of this
  voice (durations do not scale 1:1 with `length_scale`). The voice cannot speak faster than about
  2x (`BackendCapabilities.max_native_speed`); the server time-stretches any speed beyond that.
- Word times are exact (`capabilities.word_timings`): asked for (`SynthesisRequest.spans`), each sentence
  is synthesised with piper's phoneme lengths, turned into word spans by `embedded_words`.
- Only Latin-script text is spoken (lone Greek letters such as π are read as symbols). Chinese,
  Japanese, Korean or other scripts are refused with `unsupported_language` rather than read out
  as English-letter gibberish; VoxCPM2 speaks them.

Sentences are synthesised by a `FairQueue` (see `polyvox.backends.fair_queue`): concurrent requests
share its workers fairly, every waiting request's first sentence before anyone's second as long as
the streams already playing can wait for it, then round-robin. The pool is sized to the cores this
process may use (`embedded_workers`): by default one worker per core, each running ONNX Runtime on
one thread, so one worker's phonemisation and Python work overlap another's inference and no
intra-op threads spin against each other (fewer workers get the spare cores as ONNX threads: a
lone sentence is then quicker, the whole pool slower). The next sentence is queued only when the
consumer asks for it, so closing the iterator stops the utterance after at most the sentence in
flight, and a sentence still waiting is dropped.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import numpy as np

from polyvox.alignment.aligners import Span
from polyvox.backends.base import OPENAI_VOICES, Backend, BackendCapabilities, BackendInfo, SynthesisRequest
from polyvox.backends.embedded_voice import VOICE_NAME, VOICE_SHA256, VoiceFiles, load_voice, locate_voice
from polyvox.backends.embedded_words import word_spans
from polyvox.backends.errors import BackendError, BackendInputError
from polyvox.backends.fair_queue import FairQueue, Listener, Place
from polyvox.runtime.cpus import usable_cpus
from polyvox.runtime.ready_signal import ReadySignal
from polyvox.settings import Settings
from polyvox.text.script import Script, detect_scripts, foreign_letters
from polyvox.text.split import split_sentences

MODEL_ID = "polyvox-embedded"


@dataclass(frozen=True)
class VoiceStyle:
    name: str  # the delivery, as the voice list describes it
    sound: str
    noise_scale: float
    noise_w_scale: float


_CALM = VoiceStyle("calm", "steadier pitch and rhythm", 0.5, 0.6)
_DEFAULT = VoiceStyle("default", "the voice's own variation", 0.667, 0.8)
_LIVELY = VoiceStyle("lively", "more varied pitch and rhythm", 0.8, 0.9)
VOICE_STYLES: dict[str, VoiceStyle] = {
    **dict.fromkeys(("onyx", "echo", "sage", "cedar", "ash"), _CALM),
    **dict.fromkeys(("alloy", "fable", "verse", "marin"), _DEFAULT),
    **dict.fromkeys(("nova", "shimmer", "coral", "ballad"), _LIVELY),
}
assert set(VOICE_STYLES) == set(OPENAI_VOICES)


def describe_voice(voice: str) -> str:
    """What the voice list says of `voice`: its delivery, and which names share it (one speaker)."""
    style = VOICE_STYLES[voice]
    same = sorted(other for other, its in VOICE_STYLES.items() if its is style and other != voice)
    shared = ", ".join(same[:-1]) + f" and {same[-1]}"
    noise = f"piper noise {style.noise_scale}/{style.noise_w_scale}"
    delivery = f"{style.name.capitalize()} delivery: {style.sound} ({noise})"
    return f"{delivery}. Same speaker and delivery as {shared}."


# (length_scale, duration of speech relative to length_scale 1), averaged over eight English
# sentences for this voice (piper rounds each phoneme up to whole frames, so the curve flattens
# towards a floor of about half the normal duration).
_SPEED_CURVE = np.array([
    (0.25, 0.505), (0.3, 0.523), (0.4, 0.578), (0.5, 0.632), (0.6, 0.679), (0.7, 0.771),
    (0.85, 0.925), (1.0, 1.0), (1.2, 1.104), (1.4, 1.29), (1.7, 1.534), (2.0, 1.756),
    (2.5, 2.142), (3.0, 2.509), (4.0, 3.274), (5.0, 4.028), (6.0, 4.775),
])  # fmt: skip
_LENGTH_SCALES, _DURATION_RATIOS = _SPEED_CURVE[:, 0], _SPEED_CURVE[:, 1]
MAX_NATIVE_SPEED = round(1.0 / float(_DURATION_RATIOS[0]), 2)


def length_scale_for(speed: float) -> float:
    """Piper's `length_scale` that makes this voice speak at `speed` times its normal rate."""
    return float(np.interp(1.0 / speed, _DURATION_RATIOS, _LENGTH_SCALES))


class EmbeddedBackend(Backend):
    """The piper voice behind the Backend contract (see `polyvox.backends.base`)."""

    def __init__(
        self,
        max_workers: int | None = None,
        max_chars: int = 200,
        files: VoiceFiles | None = None,
        expected_sha256: str = VOICE_SHA256,
    ):
        cores = usable_cpus()
        self.max_chars = max_chars
        self.workers = max_workers or cores
        self.threads_per_worker = max(1, cores // self.workers)
        self._files = files
        self._expected_sha256 = expected_sha256
        self._voice = None
        self._queue: FairQueue | None = None
        self._ready_signal = ReadySignal()  # announced as it starts and stops
        self._count_lock = threading.Lock()
        self.sentences_synthesised = 0
        self.info = BackendInfo(
            name="embedded",
            model_id=MODEL_ID,
            sample_rate=22050,
            capabilities=BackendCapabilities(
                native_speed=True, max_native_speed=MAX_NATIVE_SPEED, word_timings=True
            ),
            languages=("en",),
            extra={
                "voice": VOICE_NAME,
                "voice_sha256": VOICE_SHA256,
            },
            voice_descriptions={voice: describe_voice(voice) for voice in VOICE_STYLES},
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> EmbeddedBackend:
        """The back end for `settings` (`embedded_workers`; unset sizes the pool to the cores)."""
        return cls(max_workers=settings.embedded_workers)

    @property
    def ready(self) -> bool:
        return self._voice is not None

    async def until_ready(self, ready: bool = True) -> None:
        await self._ready_signal.until(lambda: self.ready == ready)

    @property
    def sentences_waiting(self) -> int:
        """Sentences queued for a worker and not started (0 when stopped)."""
        queue = self._queue
        return queue.waiting if queue is not None else 0

    async def start(self) -> None:
        if self._voice is not None:
            return
        voice = await asyncio.to_thread(self._load)
        self.info.sample_rate = voice.config.sample_rate
        self._queue = FairQueue(self.workers, voice.config.sample_rate, thread_name_prefix="polyvox-embedded")
        self._voice = voice
        self._ready_signal.announce()

    async def stop(self) -> None:
        queue, self._queue, self._voice = self._queue, None, None
        self._ready_signal.announce()
        if queue is not None:
            queue.close()

    def validate(self, request: SynthesisRequest) -> None:
        if request.reference is not None:
            raise BackendInputError(
                "The embedded voice cannot clone a voice; serve the VoxCPM2 engine "
                "(polyvox serve --model CHECKPOINT) to clone from reference audio.",
                param=request.reference.field,
                code="cloning_unsupported",
            )
        if request.voice not in VOICE_STYLES:
            raise BackendInputError(
                f"Unknown voice {request.voice!r} for the embedded engine; choose one of: "
                f"{', '.join(OPENAI_VOICES)}.",
                param="voice",
                code="unknown_voice",
            )
        if detect_scripts(request.text) - {Script.LATIN}:
            sample = foreign_letters(request.text)[:12]
            raise BackendInputError(
                f"The embedded English voice cannot speak this text (it contains {sample!r}); only English "
                "is supported. Serve the VoxCPM2 engine (polyvox serve --model CHECKPOINT) for Chinese "
                "and other languages.",
                param="input",
                code="unsupported_language",
            )
        if not request.speed > 0:
            raise BackendInputError("speed must be positive.", param="speed", code="invalid_speed")
        self.info.capabilities.check_emotion(request.emotion, self.info.name)

    async def generate(self, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
        """Yield each sentence's float32 audio as soon as it is synthesised."""
        self.validate(request)
        voice, queue = self._voice, self._queue
        if voice is None or queue is None:
            raise BackendError("The embedded engine is not started.")
        from piper import SynthesisConfig

        style = VOICE_STYLES[request.voice]
        config = SynthesisConfig(
            length_scale=length_scale_for(request.speed),
            noise_scale=style.noise_scale,
            noise_w_scale=style.noise_w_scale,
            volume=0.9,
        )
        # a request the text pipeline did not mark is a listener of its own
        place = Place(request.listener or Listener(), request.piece or 0)
        offset = 0  # samples of the piece so far: where the next sentence's words start
        for index, sentence in enumerate(split_sentences(request.text, self.max_chars)):
            spans: list[Span] | None = [] if request.spans is not None else None
            work = functools.partial(self._synthesize, voice, sentence, config, spans)
            audio = await queue.run(place, work, sentence=index, size=len(sentence))
            if request.spans is not None and spans is not None:
                seconds = offset / voice.config.sample_rate
                request.spans.extend(Span(s.start + seconds, s.end + seconds, s.approximate) for s in spans)
            offset += audio.size
            if audio.size:
                yield audio

    def _load(self):
        voice = load_voice(self._files or locate_voice(), self._expected_sha256, self.threads_per_worker)
        for _ in voice.synthesize("Hello."):
            pass
        return voice

    def _synthesize(self, voice, sentence: str, config, spans: list[Span] | None) -> np.ndarray:
        """The sentence's audio; with `spans`, one span per word of it appended there (none when piper
        could not report its phonemes' lengths: the server's aligner times the piece instead)."""
        timed = spans is not None
        chunks = list(voice.synthesize(sentence, syn_config=config, include_alignments=timed))
        with self._count_lock:
            self.sentences_synthesised += 1
        if not chunks:
            return np.zeros(0, dtype=np.float32)
        audio = np.concatenate([chunk.audio_float_array for chunk in chunks]).astype(np.float32, copy=False)
        if spans is not None and all(chunk.phoneme_alignments is not None for chunk in chunks):
            timed_phonemes = [(a.phoneme, int(a.num_samples)) for c in chunks for a in c.phoneme_alignments]
            phonemize = functools.partial(_phonemes, voice)
            spans.extend(word_spans(timed_phonemes, sentence.split(), phonemize, voice.config.sample_rate))
        return audio


def _phonemes(voice, word: str) -> list[str]:
    """A word's phonemes as the voice phonemises it on its own."""
    return [phoneme for sentence in voice.phonemize(word) for phoneme in sentence]

"""What the engine-process tests share: a `polyvox serve` with two engine ranks on the CPU, long requests
that stay in flight for seconds, streams whose clients note what they received and how they ended, and
reading the per-rank engine metrics."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

import httpx

from helpers.metrics import value

SPEECH = "/v1/audio/speech"
FLAGS = (
    "--random-weights", "tiny", "--device", "cpu", "--no-cache-enabled", "--num-kv-blocks", "1024",
    "--data-parallel-size", "2", "--log-level", "warning", "--max-piece-chars", "40",
)  # fmt: skip
# Many sentences: many pieces (two a sentence at `--max-piece-chars 40`), each generated in turn, so the
# request stays in flight for seconds (the tests wait for it to be in flight, then act).
LONG = " ".join(f"Sentence number {n} goes on for a little while." for n in range(1, 9))
# LONG is sent with this seed, so it is the same work in every run: 20 s of audio from the tiny random
# model. Unseeded, the model's noise decides when each piece stops: 10 to 97 s of audio, 38 on average
# (24 takes), and a test's time with it.
LONG_SEED = 1


def speak(url: str, text: str, voice: str = "alloy", **extra) -> httpx.Response:
    body = {"input": text, "voice": voice, "response_format": "pcm", **extra}
    return httpx.post(f"{url}{SPEECH}", json=body, timeout=300)


def per_rank(samples: dict, name: str) -> list[float]:
    return [value(samples, name, rank=str(rank)) for rank in range(2)]


def routed_per_rank(samples: dict, ranks: int = 2) -> list[float]:
    """Requests routed to each rank, for either reason (each once, and again when sent again)."""
    name = "polyvox_engine_routed_requests_total"
    return [
        sum(value(samples, name, rank=str(rank), reason=reason) for reason in ("affinity", "load"))
        for rank in range(ranks)
    ]


def rerouted(samples: dict, rank: int, reason: str = "rank_died") -> float:
    return value(samples, "polyvox_engine_rerouted_requests_total", rank=str(rank), reason=reason)


@dataclass
class Stream:
    """One streamed wav answer as its client saw it: the audio bytes so far (an SSE stream's deltas
    joined) and how it ended: `done` (the whole answer: a chunked transfer's last chunk, SSE's
    `speech.audio.done`), `error` (an SSE `error` event, `code` its code), `cut` (the transfer broke
    off) or `refused` (an error answer before any audio, `code` its code)."""

    text: str
    seed: int
    voice: str = "alloy"
    sse: bool = False
    audio: bytearray = field(default_factory=bytearray)
    ended: str | None = None
    code: str | None = None

    def run(self, url: str) -> None:
        body = {"input": self.text, "voice": self.voice, "response_format": "wav", "seed": self.seed}
        if self.sse:
            body["stream_format"] = "sse"
        try:
            with httpx.stream("POST", f"{url}{SPEECH}", json=body, timeout=180) as response:
                if response.status_code != 200:
                    response.read()
                    self.ended, self.code = "refused", response.json()["error"]["code"]
                elif self.sse:
                    self._events(response)
                else:
                    for piece in response.iter_bytes():
                        self.audio += piece
                    self.ended = "done"
        except httpx.RemoteProtocolError:
            self.ended = "cut"

    def _events(self, response: httpx.Response) -> None:
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            if event["type"] == "speech.audio.delta":
                self.audio += base64.b64decode(event["audio"])
            elif event["type"] == "speech.audio.done":
                self.ended = "done"
            elif event["type"] == "error":
                self.ended, self.code = "error", event["error"]["code"]

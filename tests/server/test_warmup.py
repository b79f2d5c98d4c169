"""`warmup`: before `/ready` turns 200 the server freezes the builtin voices and sends a request through
every engine rank, each part a start-up stage in its log, so the first request after `/ready` does none
of that work. The tiny random VoxCPM2 on two engine ranks on the CPU, in a real `polyvox serve`."""

from __future__ import annotations

from pathlib import Path

import openai

from engine.serving import routed_per_rank
from helpers.audio import decode
from helpers.metrics import scrape, value
from helpers.serve_process import polyvox_serve
from polyvox.backends.base import OPENAI_VOICES

TINY = ("--random-weights", "tiny", "--device", "cpu", "--no-cache-enabled", "--num-kv-blocks", "512")
FREEZES = "polyvox_voice_builtin_freezes_total"


def test_the_first_request_after_ready_finds_the_warm_up_done(tmp_path: Path) -> None:
    flags = (*TINY, "--data-parallel-size", "2", "--warmup", "--voices-dir", str(tmp_path / "voices"))
    with polyvox_serve(*flags, "--log-level", "info") as (proc, url):
        warmed = scrape(url)  # /ready has just turned 200; no request has been sent
        assert value(warmed, FREEZES) == len(OPENAI_VOICES)  # every builtin voice frozen
        assert all(count >= 1 for count in routed_per_rank(warmed))  # a request through each rank

        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)
        speech = client.audio.speech.create(model="tts-1", voice="alloy", input="The first request.")
        assert decode(speech.content)[0].size > 0
        assert value(scrape(url), FREEZES) == len(OPENAI_VOICES)  # its voice was frozen before it came
        proc.terminate()
        log = proc.communicate(timeout=120)[0]

    assert "start-up: freeze the builtin voices done in" in log, log
    assert "start-up: warm-up: one request through each of 2 engine rank(s) done in" in log, log
    # the warm-up finished before the server said it was ready for traffic
    assert log.index("warm-up: one request through each of 2 engine rank(s) done") < log.index(
        "POST /v1/audio/speech"
    )

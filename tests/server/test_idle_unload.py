"""Cold starts: `idle_unload_s` releases the engine after that many idle seconds (its engine process
exits) and the next request loads it again and is served; `load_on_demand` starts without loading it.
Meanwhile `/ready` answers 200 "cold", and /metrics counts loads and unloads and times the last cold
start. A request that comes while an unload is under way waits for it and is served: none is lost.
The tiny random VoxCPM2 on the CPU in a real `polyvox serve`; the race on a fake engine whose stop is
held, so the request surely arrives in the middle of it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import openai

from engine.processes import engine_pids
from helpers.audio import decode
from helpers.clips import wav_bytes
from helpers.metrics import scrape, value
from helpers.serve_process import polyvox_serve
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.server.app_state import app_state
from polyvox.settings import Settings

TINY = ("--random-weights", "tiny", "--device", "cpu", "--no-cache-enabled", "--num-kv-blocks", "256")


def wait_for(condition: Callable[[], bool], within_s: float = 120.0) -> bool:
    """Whether `condition` came true within `within_s` (a wait, not a measure of speed)."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def speak(url: str, text: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)
    audio, _ = decode(
        client.audio.speech.create(model="tts-1", voice="alloy", input=text, response_format="wav").content
    )
    assert audio.size > 0


def status(url: str) -> str:
    response = httpx.get(f"{url}/ready")
    assert response.status_code == 200, response.text
    return response.json()["status"]


def test_an_idle_engine_is_unloaded_and_the_next_request_loads_it_again() -> None:
    """After a second idle the engine goes (loaded at start, or again for the first request had it gone
    already: a loaded machine may take that second between /ready and the request), and stays gone
    until a request comes; that request loads it. What lasts a second only is not asserted on."""
    with polyvox_serve(*TINY, "--idle-unload-s", "1", "--log-level", "warning") as (proc, url):
        speak(url, "Before the engine goes cold.")

        def gone() -> bool:
            """Unloaded, its process exited (weights and KV cache gone), and counted (after the exit): one
            unload more than loads, whether or not the engine went cold before the first request."""
            samples = scrape(url)
            unloads, loads = (value(samples, f"polyvox_engine_{n}_total") for n in ("unloads", "loads"))
            return engine_pids(proc.pid) == [] and unloads == loads + 1

        assert wait_for(gone)
        samples = scrape(url)  # cold until a request comes
        assert status(url) == "cold" and value(samples, "polyvox_engine_cold") == 1
        loads = value(samples, "polyvox_engine_loads_total")

        speak(url, "The engine was loaded again for this.")
        samples = scrape(url)
        assert value(samples, "polyvox_engine_loads_total") == loads + 1
        assert value(samples, "polyvox_engine_cold_start_seconds") > 0


def test_load_on_demand_starts_without_the_engine_and_loads_it_for_the_first_request() -> None:
    with polyvox_serve(*TINY, "--load-on-demand", "--log-level", "warning") as (proc, url):
        assert status(url) == "cold" and engine_pids(proc.pid) == []
        assert value(scrape(url), "polyvox_engine_loads_total") == 0

        speak(url, "The first request pays for the load.")
        assert value(scrape(url), "polyvox_engine_loads_total") == 1
        assert status(url) == "ready" and engine_pids(proc.pid)


def test_a_voice_designed_from_a_prompt_loads_a_cold_engine(tmp_path) -> None:
    flags = (*TINY, "--load-on-demand", "--voices-dir", str(tmp_path / "voices"), "--log-level", "warning")
    with polyvox_serve(*flags) as (_, url):
        assert status(url) == "cold"
        body = {"type": "prompt", "name": "narrator", "prompt": "A deep, slow, gravelly old voice"}
        designed = httpx.post(f"{url}/v1/audio/voices", json=body, timeout=300)
        assert designed.status_code == 201, designed.text
        assert value(scrape(url), "polyvox_engine_loads_total") == 1


def test_a_clip_uploaded_as_a_voice_loads_a_cold_engine(tmp_path) -> None:
    """The cloning engine checks the clip: a cold one is loaded for it (it answered 503 before)."""
    flags = (*TINY, "--load-on-demand", "--voices-dir", str(tmp_path / "voices"), "--log-level", "warning")
    rate = 16000
    t = np.arange(rate * 2) / rate
    clip = wav_bytes((0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32), rate)
    with polyvox_serve(*flags) as (_, url):
        assert status(url) == "cold"
        files = {"audio_sample": ("clip.wav", clip, "audio/wav")}
        made = httpx.post(
            f"{url}/v1/audio/voices", data={"name": "cloned", "consent": "true"}, files=files, timeout=300
        )
        assert made.status_code == 201, made.text
        assert value(scrape(url), "polyvox_engine_loads_total") == 1
        assert status(url) == "ready"
        body = {"input": "Hello.", "voice": "cloned"}
        spoken = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=300)
        assert spoken.status_code == 200 and decode(spoken.content)[0].size > 0


class HeldStop(FakeBackend):
    """A fake engine whose stop waits for `release` once `stopping` is set: an unload held midway."""

    def __init__(self) -> None:
        super().__init__()
        self.stopping = threading.Event()
        self.release = threading.Event()
        self.starts = 0

    async def start(self) -> None:
        self.starts += 1
        await super().start()

    async def stop(self) -> None:
        self.stopping.set()
        while not self.release.is_set():
            await asyncio.sleep(0.01)
        await super().stop()


def test_requests_that_come_during_an_unload_wait_for_it_and_are_served() -> None:
    backend = HeldStop()
    app = create_app(Settings(idle_unload_s=0.2), backend)
    state = app_state(app)
    with running_server(app) as url, ThreadPoolExecutor(4) as pool:
        assert backend.stopping.wait(30)  # idle since start: the unload has begun, held in the engine's stop
        racing = [
            pool.submit(httpx.post, f"{url}/v1/audio/speech", json={"input": f"during {n}"}, timeout=60)
            for n in range(4)
        ]
        assert wait_for(lambda: state.service.lifecycle.accepted == 4, 30)  # all four are in
        backend.release.set()
        assert [r.result().status_code for r in racing] == [200] * 4
        assert backend.starts == 2  # started, stopped, and started once again for all four
        samples = scrape(url)
        assert value(samples, "polyvox_engine_loads_total") == 1  # one load served all four
        # the first unload, and a second one if the scrape came more than idle_unload_s after the four
        # ended (a loaded machine): idle again, the engine is unloaded again, as it should be
        assert value(samples, "polyvox_engine_unloads_total") in (1, 2)

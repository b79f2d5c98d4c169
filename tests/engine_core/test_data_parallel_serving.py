"""`polyvox serve --data-parallel-size 2` on the CPU (tiny random weights): two engine processes behind
one API server. A seeded request sounds as it does in-thread; a repeated voice stays on one rank; a
client that goes away mid-stream frees its request in the engine process; kill -9 of one engine fails
only the request it was running while the other rank serves on, `/ready` says degraded until the
engine is back, and nothing leaks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from engine_core.processes import alive, engine_pids, kill9
from engine_core.serving import FLAGS, LONG, SPEECH, per_rank, speak, wait_until
from helpers.audio import decode
from helpers.metrics import scrape, value
from helpers.serve_process import polyvox_serve
from helpers.server import running_server
from polyvox.server.app import create_app
from polyvox.settings import Settings


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[int, str]]:
    voices = tmp_path_factory.mktemp("voices")
    with polyvox_serve(*FLAGS, "--voices-dir", str(voices)) as (proc, url):
        for voice in ("alloy", "echo"):  # frozen on first use: done here, before the tests time anything
            assert speak(url, "Warm up.", voice).status_code == 200
        yield proc.pid, url


def idle(url: str) -> bool:
    samples = scrape(url)
    busy = per_rank(samples, "polyvox_engine_running_requests") + per_rank(
        samples, "polyvox_engine_kv_blocks_used"
    )
    return not any(busy)


def test_a_seeded_request_served_by_an_engine_process_sounds_as_served_in_thread(server, tmp_path):
    """Through the official client: the same wav from the two-rank server as from one whose engine
    steps in its own thread (the same voice frozen by each, the same encoding)."""
    _, url = server

    def wav(base_url: str) -> bytes:
        client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=120)
        speech = client.audio.speech.create(
            model="voxcpm2", voice="alloy", input="Seeded, and served.", response_format="wav",
            extra_body={"seed": 11},
        )  # fmt: skip
        return speech.content

    in_thread = Settings(
        random_weights="tiny", device="cpu", num_kv_blocks=1024, engine_process=False,
        voices_dir=tmp_path / "voices", cache_enabled=False,
    )  # fmt: skip
    with running_server(create_app(in_thread)) as in_thread_url:
        expected = wav(in_thread_url)
    served = wav(url)
    assert served == expected
    assert decode(served)[0].size > 0


def test_a_repeated_voice_is_served_by_the_same_rank(server):
    _, url = server
    before = per_rank(scrape(url), "polyvox_engine_patches_total")
    for n in range(3):
        assert speak(url, f"Again, take {n}.", "echo").status_code == 200
    after = per_rank(scrape(url), "polyvox_engine_patches_total")
    grew = [rank for rank in range(2) if after[rank] > before[rank]]
    assert len(grew) == 1, (before, after)
    routed = value(scrape(url), "polyvox_engine_routed_requests_total", rank=str(grew[0]), reason="affinity")
    assert routed >= 3


def test_a_client_that_goes_away_mid_stream_frees_its_request_in_the_engine(server):
    _, url = server
    body = {"input": LONG, "voice": "alloy", "response_format": "pcm"}
    with httpx.stream("POST", f"{url}{SPEECH}", json=body, timeout=60) as response:
        assert response.status_code == 200
        chunks = response.iter_bytes()
        next(chunks)
        wait_until(lambda: not idle(url), "the request runs in an engine")
        next(chunks)
    wait_until(lambda: idle(url), "the engine holds nothing (running 0, KV blocks 0)", timeout=10)
    patches = sum(per_rank(scrape(url), "polyvox_engine_patches_total"))
    time.sleep(1.0)
    assert sum(per_rank(scrape(url), "polyvox_engine_patches_total")) == patches  # nothing runs on


def test_kill_9_of_one_engine_fails_only_its_request_and_it_comes_back(server):
    pid, url = server
    engines = engine_pids(pid)
    assert len(engines) == 2
    outcomes: dict[str, object] = {}

    def stream(voice: str) -> None:
        body = {"input": LONG, "voice": voice, "response_format": "pcm"}
        try:
            with httpx.stream("POST", f"{url}{SPEECH}", json=body, timeout=120) as response:
                outcomes[voice] = (response.status_code, len(response.read()))
        except httpx.HTTPError as exc:  # the transfer was cut: the documented failure after the first byte
            outcomes[voice] = exc

    # two voices that have never shared a rank's prefix: the router puts one request on each rank
    threads = [threading.Thread(target=stream, args=(voice,)) for voice in ("alloy", "echo")]
    for thread in threads:
        thread.start()
        time.sleep(0.2)
    wait_until(lambda: all(per_rank(scrape(url), "polyvox_engine_running_requests")), "both ranks run one")
    victim = engines[0]
    kill9(victim)
    wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "degraded", "/ready says degraded")
    ready = httpx.get(f"{url}/ready")
    assert ready.status_code == 200 and len(ready.json()["ranks_down"]) == 1
    for thread in threads:
        thread.join(timeout=120)

    failed = [voice for voice, outcome in outcomes.items() if not _complete(outcome)]
    assert len(failed) == 1, outcomes  # the killed engine's request, and only it
    wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "the engine is back")
    assert all(speak(url, f"After the crash, take {n}.").status_code == 200 for n in range(2))
    wait_until(lambda: idle(url), "every KV block is free again")
    samples = scrape(url)
    assert per_rank(samples, "polyvox_engine_up") == [1.0, 1.0]
    assert sum(per_rank(samples, "polyvox_engine_rank_restarts_total")) == 1
    now = engine_pids(pid)
    assert len(now) == 2 and victim not in now and not alive(victim)


def _complete(outcome: object) -> bool:
    return isinstance(outcome, tuple) and outcome[0] == 200 and outcome[1] > 24000 * 2 * 2

"""`polyvox serve --data-parallel-size 2` on the CPU (tiny random weights): two engine processes behind
one API server. A seeded request sounds as it does in-thread; a repeated voice stays on one rank; a
client that goes away mid-stream frees its request in the engine process; a prompt with no room to speak
is refused by the engine process with its param; kill -9 of one engine loses no request that had no
audio yet (each is sent again to the other rank, its seed kept) and ends the others in the documented
way (an SSE `error` event, a cut chunked transfer), while the other rank serves on untouched and takes
every new request, `/ready` says degraded until the engine is back, and nothing leaks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from engine.processes import alive, engine_pid_of_rank, engine_pids, freeze, kill9
from engine.serving import (
    FLAGS,
    LONG,
    SPEECH,
    Stream,
    per_rank,
    rerouted,
    routed_per_rank,
    speak,
)
from helpers.audio import decode, duration
from helpers.metrics import scrape, value
from helpers.ready_watch import watching_ready
from helpers.serve_process import polyvox_serve
from helpers.server import running_server
from helpers.waiting import wait_until
from polyvox.server.app import create_app
from polyvox.settings import Settings


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[int, str]]:
    voices = tmp_path_factory.mktemp("voices")
    # four requests run at a time on each rank, the rest wait in its queue
    with polyvox_serve(*FLAGS, "--voices-dir", str(voices), "--max-num-seqs", "4") as (proc, url):
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


def test_a_prompt_with_no_room_to_speak_is_refused_naming_its_part_across_the_process_boundary(server):
    """The engine process refuses the prompt (it knows the positions); the typed error crosses back with
    its param and code, and the server answers 422 in OpenAI's error shape."""
    _, url = server
    body = {"input": "Hello there.", "instructions": "a calm and warm voice, " * 80}
    refused = httpx.post(f"{url}{SPEECH}", json=body, timeout=120)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == "instructions" and "no room to speak" in error["message"]
    assert speak(url, "And the next one speaks.").status_code == 200


def test_kill_9_of_the_busier_rank_sends_again_every_request_that_had_no_audio(server, tmp_path):
    """24 streams (wav, every third as SSE, each with its seed) in flight and queued on both ranks (four
    run at a time on each); the busier rank is frozen (SIGSTOP: it sends nothing more, so which streams
    had audio cannot change while the test reads it), then killed with -9, and new requests are sent
    at once and while it restarts. Every stream that had no audio is served whole by the other rank: the
    same length as the same request served afterwards (its seed kept); every other one ends whole or in
    the documented way (an SSE `error` event, a cut chunked transfer). Every new request is served. The
    dead rank alone restarts, its re-sent requests counted; the other's process and counters live on."""
    pid, url = server
    streams = [
        Stream(f"Request {n} is long enough for two pieces.", 100 + n, ("alloy", "echo")[n % 2], n % 3 == 0)
        for n in range(24)
    ]
    samples = scrape(url)
    routed_before, patches_before = (
        routed_per_rank(samples),
        per_rank(samples, "polyvox_engine_patches_total"),
    )
    threads = [threading.Thread(target=s.run, args=(url,)) for s in streams]
    for thread in threads:
        thread.start()

    def in_flight() -> bool:
        samples = scrape(url)
        patches = per_rank(samples, "polyvox_engine_patches_total")
        return sum(routed_per_rank(samples)) >= sum(routed_before) + 24 and all(
            patches[rank] > patches_before[rank] for rank in range(2)
        )

    wait_until(in_flight, "every request is routed and both ranks send audio")
    samples = scrape(url)
    routed = [now - before for now, before in zip(routed_per_rank(samples), routed_before, strict=True)]
    dead = routed.index(max(routed))  # the busier: more of the 24 were sent to it
    victim, survivor = engine_pid_of_rank(pid, dead), engine_pid_of_rank(pid, 1 - dead)
    patches_survivor = per_rank(samples, "polyvox_engine_patches_total")[1 - dead]

    freeze(victim)

    def settled() -> bool:
        """No stream began to get audio in the last second: what the stopped rank made has reached its
        clients (the threads of this process read them in turn), and the other rank, whose queued
        streams begin one after another, has begun them all."""
        had = [bool(stream.audio) for stream in streams]
        time.sleep(1.0)
        return [bool(stream.audio) for stream in streams] == had

    wait_until(settled, "which streams have audio stops changing")
    silent = [s for s in streams if not s.audio]
    # the rank of the tiny model is back about 0.2 s after it died: /ready is watched from a process
    # of its own, which this one's threads cannot keep from asking in time
    with watching_ready(url, tmp_path / "ready.jsonl") as ready:
        kill9(victim)
        new = [Stream(f"New request {n}.", seed=200 + n) for n in range(6)]
        threads += [threading.Thread(target=s.run, args=(url,)) for s in new[:3]]  # before it is found dead
        for thread in threads[-3:]:
            thread.start()
        degraded = ready.wait_for(lambda answer: answer.get("status") == "degraded", "/ready says degraded")
        assert degraded["ranks_down"] == [dead]
        for stream in new[3:]:  # while it restarts, or after
            stream.run(url)
        for thread in threads:
            thread.join(timeout=180)
        wait_until(lambda: ready.answers()[-1].get("status") == "ready", "the rank is back")
    # 200 throughout: ready, degraded while the rank was down, ready again once it was back
    assert [(a["http"], a.get("status")) for a in ready.answers()] == [
        (200, "ready"),
        (200, "degraded"),
        (200, "ready"),
    ], ready.answers()

    assert silent, "no stream was waiting without audio when the rank died"
    for stream in silent + new:
        assert stream.ended == "done", (stream.text, stream.ended, stream.code)
        assert decode(bytes(stream.audio))[0].size > 0
    for stream in streams:
        assert stream.ended in ("done", "error", "cut"), (stream.text, stream.ended, stream.code)
        assert stream.ended != "error" or stream.code == "engine_error", stream.code
        assert stream.ended != "cut" or not stream.sse
    samples = scrape(url)
    assert rerouted(samples, dead) >= 1 and rerouted(samples, 1 - dead) == 0

    whole = [s for s in streams + new if s.ended == "done"]
    again = [Stream(s.text, s.seed, s.voice) for s in whole]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda s: s.run(url), again))
    for first, second in zip(whole, again, strict=True):
        assert second.ended == "done"
        assert duration(bytes(first.audio), "wav") == duration(bytes(second.audio), "wav"), first.text

    wait_until(lambda: idle(url), "every KV block is free again")
    samples = scrape(url)
    assert per_rank(samples, "polyvox_engine_up") == [1.0, 1.0]
    restarts = per_rank(samples, "polyvox_engine_rank_restarts_total")
    assert restarts[dead] == 1 and restarts[1 - dead] == 0
    assert value(samples, "polyvox_engine_restarts_total") == 0  # the engine as a whole was not rebuilt
    assert per_rank(samples, "polyvox_engine_patches_total")[1 - dead] > patches_survivor  # counted on
    now = engine_pids(pid)
    assert survivor in now and len(now) == 2 and victim not in now and not alive(victim)

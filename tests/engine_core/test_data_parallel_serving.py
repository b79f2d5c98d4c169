"""`polyvox serve --data-parallel-size 2` on the CPU (tiny random weights): two engine processes behind
one API server. A seeded request sounds as it does in-thread; a repeated voice stays on one rank; a
client that goes away mid-stream frees its request in the engine process; a prompt with no room to speak
is refused by the engine process with its param; kill -9 of one engine fails only its requests, each in
the documented way (a 500 before the first byte, an SSE `error` event, a cut chunked transfer), while
the other rank serves on untouched, `/ready` says degraded until the engine is back, and nothing
leaks."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import httpx
import openai
import pytest

from engine_core.processes import alive, engine_pid_of_rank, engine_pids, freeze, kill9
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


def test_kill_9_of_one_engine_fails_only_its_requests_as_documented_while_the_other_serves(server):
    """Rank A runs an SSE stream and a chunked transfer, both past their first bytes, and then, frozen
    (SIGSTOP) so that it cannot answer, a request with no byte yet; rank B runs two chunked transfers.
    kill -9 of A: the SSE stream ends with an `error` event, the chunked transfer is cut, the request
    with no byte yet gets a 500 in OpenAI's error shape. B finishes its transfers and serves new requests
    while A restarts, its process and counters untouched; A alone is restarted and comes back."""
    pid, url = server
    results: dict[str, object] = {}
    first: dict[str, threading.Event] = defaultdict(threading.Event)
    threads: list[threading.Thread] = []
    strays: dict[str, int] = {}  # requests the loads sent to the other rank than the one wanted, by rank

    def launch(target, label: str, voice: str) -> int:
        """Start a request; the rank it was routed to (each request is routed once, its pieces follow)."""
        before = [_routed(url, rank) for rank in (0, 1)]
        args = (url, results, label, voice) + ((first[label],) if target is not _post else ())
        threads.append(threading.Thread(target=target, args=args))
        threads[-1].start()
        wait_until(lambda: [_routed(url, rank) for rank in (0, 1)] != before, f"{label} is routed")
        return 0 if _routed(url, 0) > before[0] else 1

    def launch_on(rank: int, target, name: str, voice: str) -> str:
        """Start requests until one is routed to `rank` (the loads, pieces in flight, decide; each that
        goes to the other rank makes that one busier)."""
        for attempt in range(10):
            label = f"{name}.{attempt}"
            if launch(target, label, voice) == rank:
                return label
            strays[label] = 1 - rank
        raise AssertionError(f"no {name} request was sent to rank {rank}")

    sse = "sse"
    rank_a = launch(_sse, sse, "alloy")  # the first request: its rank is A
    rank_b = 1 - rank_a
    assert first[sse].wait(120)
    b1 = launch_on(rank_b, _chunked, "b1", "echo")
    b2 = launch_on(rank_b, _chunked, "b2", "echo")
    cut = launch_on(rank_a, _chunked, "cut", "alloy")
    for label in (b1, b2, cut):
        assert first[label].wait(120), label
    victim, survivor = engine_pid_of_rank(pid, rank_a), engine_pid_of_rank(pid, rank_b)

    freeze(victim)
    before_first_byte = launch_on(rank_a, _post, "before_first_byte", "alloy")
    patches_b = per_rank(scrape(url), "polyvox_engine_patches_total")[rank_b]
    kill9(victim)

    wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "degraded", "/ready says degraded")
    assert httpx.get(f"{url}/ready").json()["ranks_down"] == [rank_a]
    during = speak(url, "Still here.")  # sent while A is down (alloy's rank): B serves it
    assert during.status_code == 200 and len(during.content) > 0
    for thread in threads:
        thread.join(timeout=180)

    refused = results[before_first_byte]
    assert isinstance(refused, httpx.Response) and refused.status_code == 500, refused
    error = refused.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "engine_error"
    status, events = results[sse]
    assert status == 200 and events[0]["type"] == "speech.audio.delta"
    assert events[-1]["type"] == "error" and events[-1]["error"]["code"] == "engine_error", events[-1]
    assert not any(event["type"] == "speech.audio.done" for event in events)
    assert isinstance(results[cut], httpx.RemoteProtocolError), results[cut]  # the transfer was cut
    assert _complete(results[b1]) and _complete(results[b2]), (results[b1], results[b2])
    for label, rank in strays.items():  # on B: served whole; on A: failed with it
        outcome = results[label]
        if rank == rank_b:
            assert _complete(outcome) or getattr(outcome, "status_code", None) == 200, (label, outcome)
        else:
            assert not _complete(outcome) and getattr(outcome, "status_code", None) != 200, (label, outcome)

    wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "rank A is back")
    assert all(speak(url, f"After the crash, take {n}.").status_code == 200 for n in range(2))
    wait_until(lambda: idle(url), "every KV block is free again")
    samples = scrape(url)
    assert per_rank(samples, "polyvox_engine_up") == [1.0, 1.0]
    restarts = per_rank(samples, "polyvox_engine_rank_restarts_total")
    assert restarts[rank_a] == 1 and restarts[rank_b] == 0
    assert value(samples, "polyvox_engine_restarts_total") == 0  # the engine as a whole was not rebuilt
    assert per_rank(samples, "polyvox_engine_patches_total")[rank_b] > patches_b  # B's counters live on
    now = engine_pids(pid)
    assert survivor in now and len(now) == 2 and victim not in now and not alive(victim)


def _sse(url: str, results: dict, name: str, voice: str, first: threading.Event) -> None:
    body = {"input": LONG, "voice": voice, "response_format": "pcm", "stream_format": "sse"}
    events: list[dict] = []
    try:
        with httpx.stream("POST", f"{url}{SPEECH}", json=body, timeout=180) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line.removeprefix("data: ")))
                    first.set()
        results[name] = (response.status_code, events)
    except httpx.HTTPError as exc:
        results[name] = exc
    finally:
        first.set()


def _chunked(url: str, results: dict, name: str, voice: str, first: threading.Event) -> None:
    body = {"input": LONG, "voice": voice, "response_format": "pcm"}
    received = 0
    try:
        with httpx.stream("POST", f"{url}{SPEECH}", json=body, timeout=180) as response:
            for piece in response.iter_bytes():
                received += len(piece)
                first.set()
        results[name] = (response.status_code, received)
    except httpx.HTTPError as exc:  # a cut transfer: the documented failure after the first byte
        results[name] = exc
    finally:
        first.set()


def _post(url: str, results: dict, name: str, voice: str) -> None:
    results[name] = speak(url, LONG, voice)  # long: one that goes to B stays in flight, making B busier


def _routed(url: str, rank: int) -> float:
    samples = scrape(url)
    name = "polyvox_engine_routed_requests_total"
    return sum(value(samples, name, rank=str(rank), reason=reason) for reason in ("affinity", "load"))


def _complete(outcome: object) -> bool:
    return isinstance(outcome, tuple) and outcome[0] == 200 and outcome[1] > 24000 * 2 * 2

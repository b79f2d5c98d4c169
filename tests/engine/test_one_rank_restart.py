"""`polyvox serve` with one engine process on the CPU (tiny random weights): kill -9 of it while requests
wait in it with no audio yet, and new requests sent while it restarts. None is failed: each waits for the
restarted process and is served whole (those it held with their seed kept, counted as sent again), while
`/ready` says the engine is restarting."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from engine.processes import engine_pid_of_rank, freeze, kill9
from engine.serving import FLAGS, Stream, rerouted, routed_per_rank, speak
from helpers.audio import decode, duration
from helpers.metrics import scrape, value
from helpers.ready_watch import watching_ready
from helpers.serve_process import polyvox_serve
from helpers.waiting import wait_until

# the default CPU KV cache of the tiny model (2 GiB, 131,072 blocks): its engine core takes a while to
# build, so a restart keeps the rank down for about 1.3 s (0.2 s with 1,024 blocks), time enough for the
# requests a test sends once it sees the rank down to find it still down
ONE_RANK = ["131072" if flag == "1024" else flag for flag in FLAGS]
ONE_RANK[ONE_RANK.index("--data-parallel-size") + 1] = "1"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[int, str]]:
    voices = tmp_path_factory.mktemp("voices")
    with polyvox_serve(*ONE_RANK, "--voices-dir", str(voices)) as (proc, url):
        warm = speak(url, "Warm up.")  # alloy frozen, before anything is counted
        assert warm.status_code == 200, warm.text
        yield proc.pid, url


def test_requests_waiting_in_the_only_rank_when_it_dies_are_served_by_its_restart(server):
    pid, url = server
    samples = scrape(url)
    before = routed_per_rank(samples, ranks=1)[0]
    rerouted_before = rerouted(samples, 0)
    restarts_before = value(samples, "polyvox_engine_rank_restarts_total", rank="0")
    victim = engine_pid_of_rank(pid, 0)
    freeze(victim)  # it takes what it is sent and answers nothing: every request waits without audio
    streams = [Stream(f"Waiting, number {n}.", seed=300 + n, sse=n % 2 == 1) for n in range(4)]
    threads = [threading.Thread(target=s.run, args=(url,)) for s in streams]
    for thread in threads:
        thread.start()
    wait_until(lambda: routed_per_rank(scrape(url), ranks=1)[0] == before + 4, "all four are routed")
    kill9(victim)
    for thread in threads:
        thread.join(timeout=180)

    for stream in streams:
        assert stream.ended == "done", (stream.text, stream.ended, stream.code)
        assert decode(bytes(stream.audio))[0].size > 0
    again = [Stream(s.text, s.seed) for s in streams]
    for stream in again:
        stream.run(url)
    for first, second in zip(streams, again, strict=True):
        assert duration(bytes(first.audio), "wav") == duration(bytes(second.audio), "wav"), first.text
    samples = scrape(url)
    assert rerouted(samples, 0) == rerouted_before + 4  # each sent once more, to the process started again
    assert value(samples, "polyvox_engine_rank_restarts_total", rank="0") == restarts_before + 1
    assert httpx.get(f"{url}/ready").status_code == 200


def test_new_requests_while_the_only_rank_restarts_wait_for_it_and_are_served(server, tmp_path):
    """Sent through the official client after the only engine process died, while `/ready` answers 503:
    each waits for the restarted process (within its deadline) instead of a 503, and is served whole."""
    pid, url = server
    restarts_before = value(scrape(url), "polyvox_engine_rank_restarts_total", rank="0")
    results: list[bytes | str] = [b""] * 6
    sent = [0.0] * 6

    def ask(n: int) -> None:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=180)
        sent[n] = time.monotonic()
        try:
            speech = client.audio.speech.create(
                model="voxcpm2", voice="alloy", input=f"New request {n}, sent while it restarts.",
                response_format=("wav", "mp3")[n % 2], extra_body={"seed": 40 + n, "stream": n % 3 == 0},
            )  # fmt: skip
            results[n] = speech.content
        except openai.APIError as exc:
            results[n] = f"{type(exc).__name__}: {exc}"

    with watching_ready(url, tmp_path / "ready.jsonl") as ready:
        kill9(engine_pid_of_rank(pid, 0))
        down = ready.wait_for(lambda answer: answer["http"] == 503, "/ready says the engine is not ready")
        threads = [threading.Thread(target=ask, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=180)
        back = ready.wait_for(lambda answer: answer["t"] > down["t"] and answer["http"] == 200, "it is back")

    answers = ready.answers()
    while_down = answers[answers.index(down) : answers.index(back)]
    assert {answer["error"]["code"] for answer in while_down} == {"engine_restarting"}, while_down
    assert min(sent) < back["t"], "no request went out while the engine was down"
    for result in results:
        assert isinstance(result, bytes), result
        assert decode(result)[0].size > 0
    assert value(scrape(url), "polyvox_engine_rank_restarts_total", rank="0") == restarts_before + 1
    assert httpx.get(f"{url}/ready").status_code == 200

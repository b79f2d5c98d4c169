"""`polyvox serve` with one engine process on the CPU (tiny random weights): kill -9 of it while requests
wait in it with no audio yet. They are not failed: each waits for the restarted process and is served
whole, its seed kept, and counted as sent again."""

from __future__ import annotations

import threading

import httpx

from engine_core.processes import engine_pid_of_rank, freeze, kill9
from engine_core.serving import FLAGS, Stream, rerouted, routed_per_rank, speak, wait_until
from helpers.audio import decode, duration
from helpers.metrics import scrape, value
from helpers.serve_process import polyvox_serve

ONE_RANK = list(FLAGS)
ONE_RANK[ONE_RANK.index("--data-parallel-size") + 1] = "1"


def test_requests_waiting_in_the_only_rank_when_it_dies_are_served_by_its_restart(tmp_path):
    with polyvox_serve(*ONE_RANK, "--voices-dir", str(tmp_path / "voices")) as (proc, url):
        assert speak(url, "Warm up.").status_code == 200  # alloy frozen, before anything is counted
        before = routed_per_rank(scrape(url), ranks=1)[0]
        victim = engine_pid_of_rank(proc.pid, 0)
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
        assert rerouted(samples, 0) == 4  # each sent once more, to the process started again
        assert value(samples, "polyvox_engine_rank_restarts_total", rank="0") == 1
        assert httpx.get(f"{url}/ready").status_code == 200

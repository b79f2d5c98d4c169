"""`polyvox serve --data-parallel-size 2` on the CPU (tiny random weights): a rank lost while it speaks
whole-file answers (`stream: false`), some of them part-way through a piece: killed with -9, or hung
(SIGSTOP: alive, but making no step) until `engine_hang_timeout_s` has it killed and restarted. Their
clients have received nothing yet, so none of them fails: each answer whose audio was lost is run
again, its seed kept, and every one is a complete file that decodes, as long as the same request
served afterwards."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import openai
import pytest

from engine.processes import alive, engine_pid_of_rank, freeze, kill9
from engine.serving import FLAGS, per_rank, routed_per_rank, speak
from helpers.audio import decode, duration
from helpers.metrics import scrape, value
from helpers.serve_process import polyvox_serve
from helpers.waiting import wait_until

HANG_TIMEOUT_S = 5


@dataclass
class WholeAnswer:
    """One `stream: false` request through the official client, and what came of it."""

    text: str
    seed: int
    voice: str
    audio: bytes | None = None
    error: str | None = None

    def run(self, url: str) -> None:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=240)
        try:
            speech = client.audio.speech.create(
                model="voxcpm2", voice=self.voice, input=self.text, response_format="wav",
                extra_body={"seed": self.seed, "stream": False},
            )  # fmt: skip
            self.audio = speech.content
        except openai.APIError as exc:
            self.error = f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[int, str]]:
    voices = tmp_path_factory.mktemp("voices")
    flags = (*FLAGS, "--voices-dir", str(voices), "--max-num-seqs", "4")
    with polyvox_serve(*flags, "--engine-hang-timeout-s", str(HANG_TIMEOUT_S)) as (proc, url):
        for voice in ("alloy", "echo"):  # frozen on first use, before anything is counted
            warm = speak(url, "Warm up.", voice)
            assert warm.status_code == 200, warm.text
        yield proc.pid, url


def lose_the_busier_rank_mid_answer(pid: int, url: str, lose: Callable[[int], None], first_seed: int) -> int:
    """Ten whole-file answers in flight on both ranks; `lose` the engine process of the one more were
    routed to, while it makes their audio. Every answer is served whole and decodes, and sounds as long
    as the same request served once the rank is back. Returns the lost process's pid."""
    answers = [
        WholeAnswer(
            f"Answer {n} is spoken whole. It has three pieces to say. And each one takes a while.",
            seed=first_seed + n,
            voice=("alloy", "echo")[n % 2],
        )
        for n in range(10)
    ]
    samples = scrape(url)
    routed_before = routed_per_rank(samples)
    run_again_before = value(samples, "polyvox_answers_run_again_total")
    patches_before = per_rank(samples, "polyvox_engine_patches_total")
    threads = [threading.Thread(target=a.run, args=(url,)) for a in answers]
    for thread in threads:
        thread.start()

    def speaking() -> bool:  # every answer routed, and both ranks making audio
        samples = scrape(url)
        patches = per_rank(samples, "polyvox_engine_patches_total")
        return sum(routed_per_rank(samples)) >= sum(routed_before) + len(answers) and all(
            patches[rank] > patches_before[rank] for rank in range(2)
        )

    wait_until(speaking, "every answer is routed and both ranks make audio")
    routed = routed_per_rank(scrape(url))
    busier = max(range(2), key=lambda rank: routed[rank] - routed_before[rank])
    victim = engine_pid_of_rank(pid, busier)
    lose(victim)
    for thread in threads:
        thread.join(timeout=240)

    for answer in answers:
        assert answer.error is None and answer.audio is not None, (answer.text, answer.error)
        assert decode(answer.audio)[0].size > 0
    # the lost rank was making audio for its pieces: some answers had part of theirs, and were run again
    run_again = value(scrape(url), "polyvox_answers_run_again_total") - run_again_before
    assert 1 <= run_again <= len(answers), run_again
    wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "the rank is back")
    again = [WholeAnswer(answer.text, answer.seed, answer.voice) for answer in answers]
    with ThreadPoolExecutor(5) as pool:
        list(pool.map(lambda answer: answer.run(url), again))
    for first, second in zip(answers, again, strict=True):
        assert first.audio is not None and second.audio is not None, second.error
        assert duration(first.audio, "wav") == duration(second.audio, "wav"), first.text
    return victim


def test_kill_9_of_a_rank_mid_piece_loses_no_whole_file_answer(server):
    def kill_mid_piece(victim: int) -> None:
        freeze(victim)
        time.sleep(0.5)  # what it made before it stopped reaches the API server: pieces part-way through
        kill9(victim)

    lose_the_busier_rank_mid_answer(*server, kill_mid_piece, first_seed=500)


def test_a_hung_rank_is_killed_and_restarted_and_loses_no_whole_file_answer(server):
    """SIGSTOP only: nothing but the hang watchdog (`engine_hang_timeout_s`) ends the frozen process."""
    pid, url = server
    restarts_before = per_rank(scrape(url), "polyvox_engine_rank_restarts_total")
    victim = lose_the_busier_rank_mid_answer(pid, url, freeze, first_seed=600)
    assert not alive(victim)
    restarts = per_rank(scrape(url), "polyvox_engine_rank_restarts_total")
    assert sum(restarts) == sum(restarts_before) + 1

"""`polyvox serve --data-parallel-size 2` on the CPU (tiny random weights): kill -9 of a rank while it
speaks whole-file answers (`stream: false`), some of them part-way through a piece. Their clients have
received nothing yet, so none of them fails: each answer whose audio was lost is run again, its seed
kept, and every one is a complete file that decodes, as long as the same request served afterwards."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx
import openai

from engine_core.processes import engine_pid_of_rank, freeze, kill9
from engine_core.serving import FLAGS, per_rank, routed_per_rank, speak, wait_until
from helpers.audio import decode, duration
from helpers.metrics import scrape
from helpers.serve_process import polyvox_serve


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


def test_kill_9_of_a_rank_mid_piece_loses_no_whole_file_answer(tmp_path):
    flags = (*FLAGS, "--voices-dir", str(tmp_path / "voices"), "--max-num-seqs", "4")
    with polyvox_serve(*flags) as (proc, url):
        for voice in ("alloy", "echo"):  # frozen on first use, before anything is counted
            warm = speak(url, "Warm up.", voice)
            assert warm.status_code == 200, warm.text
        answers = [
            WholeAnswer(
                f"Answer {n} is spoken whole. It has three pieces to say. And each one takes a while.",
                seed=500 + n,
                voice=("alloy", "echo")[n % 2],
            )
            for n in range(10)
        ]
        samples = scrape(url)
        routed_before = routed_per_rank(samples)
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
        dead = max(range(2), key=lambda rank: routed[rank] - routed_before[rank])  # the busier
        victim = engine_pid_of_rank(proc.pid, dead)
        freeze(victim)
        time.sleep(0.5)  # what it made before it stopped reaches the API server: pieces part-way through
        kill9(victim)
        for thread in threads:
            thread.join(timeout=240)

        for answer in answers:
            assert answer.error is None and answer.audio is not None, (answer.text, answer.error)
            assert decode(answer.audio)[0].size > 0
        wait_until(lambda: httpx.get(f"{url}/ready").json().get("status") == "ready", "the rank is back")
        for answer in answers:
            again = WholeAnswer(answer.text, answer.seed, answer.voice)
            again.run(url)
            assert again.audio is not None, again.error
            assert answer.audio is not None
            assert duration(answer.audio, "wav") == duration(again.audio, "wav"), answer.text

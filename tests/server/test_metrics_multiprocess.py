"""`/metrics` with several API processes behind one port (prometheus_client's multiprocess mode, on while
PROMETHEUS_MULTIPROC_DIR names a directory they share): a scrape of any process answers the counts of
all of them, in-flight requests of the live ones, each family once; without the variable a process
exports its own counts as before."""

from __future__ import annotations

import os
import signal
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack

import httpx
import openai
from prometheus_client.multiprocess import mark_process_dead
from prometheus_client.parser import text_string_to_metric_families

from helpers.audio import decode
from helpers.metrics import parse, scrape, value
from helpers.serve_process import polyvox_serve
from server.routed_fake import RANKS, RoutedFake, routed_fake_process

SPEECH = {"route": "/v1/audio/speech", "method": "POST", "status": "200"}
# Many sentences: the embedded voice is still speaking this one well after its first bytes.
LONG = " ".join(f"Sentence number {n} takes the voice a little while to say." for n in range(40))


def started_together(start, count: int, stack: ExitStack) -> list:
    """`count` processes from `start()` (a context manager each), started at once to save the wait."""
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: stack.enter_context(start()), range(count)))


def speak(url: str, text: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)
    audio, _ = decode(client.audio.speech.create(model="tts-1", voice="alloy", input=text).content)
    assert audio.size > 0


def family_names(url: str) -> list[str]:
    text = httpx.get(f"{url}/metrics").text
    return [family.name for family in text_string_to_metric_families(text)]


def summed(samples: dict, name: str) -> float:
    """A sample summed over all its label values."""
    return sum(count for (sample, _), count in samples.items() if sample == name)


def test_either_api_process_answers_the_counts_of_both_and_forgets_the_in_flight_of_a_dead_one(tmp_path):
    shared = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}

    def serve() -> AbstractContextManager:
        return polyvox_serve("--log-level", "warning", env=shared)

    with ExitStack() as stack:
        (first, first_url), (second, second_url) = started_together(serve, 2, stack)
        speak(first_url, "The first process, once.")
        speak(first_url, "The first process, twice.")
        speak(second_url, "The second process.")

        for url in (first_url, second_url):
            samples = scrape(url)
            assert value(samples, "polyvox_requests_total", **SPEECH) == 3
            assert summed(samples, "polyvox_time_to_first_audio_seconds_count") == 3
            assert value(samples, "polyvox_requests_in_flight") == 0
            assert value(samples, "polyvox_queue_depth") == 0
            names = family_names(url)
            assert len(names) == len(set(names)), Counter(names).most_common(3)

        body = {"input": LONG, "voice": "alloy", "response_format": "pcm", "stream_format": "audio"}
        with httpx.stream("POST", f"{second_url}/v1/audio/speech", json=body, timeout=60) as speaking:
            audio = speaking.iter_bytes()  # held: a dropped iterator would close the stream
            next(audio)
            # the second process's request, in the first process's answer
            assert value(scrape(first_url), "polyvox_requests_in_flight") == 1
            os.kill(second.pid, signal.SIGKILL)
            second.wait()
        mark_process_dead(second.pid, str(tmp_path))

        samples = scrape(first_url)
        assert value(samples, "polyvox_requests_in_flight") == 0
        # the dead process's answers stay counted
        assert value(samples, "polyvox_requests_total", **SPEECH) == 3


def test_requests_routed_to_engine_ranks_are_summed_over_the_api_processes(tmp_path):
    def serve() -> AbstractContextManager:
        return routed_fake_process({"PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})

    with ExitStack() as stack:
        (_, first_url), (_, second_url) = started_together(serve, 2, stack)
        for url, count in ((first_url, 3), (second_url, 4)):
            for n in range(count):
                body = {"input": f"request {n}", "response_format": "pcm"}
                assert httpx.post(f"{url}/v1/audio/speech", json=body).status_code == 200

        samples = scrape(first_url)
        routed = [
            value(samples, "polyvox_engine_routed_requests_total", rank=str(r), reason="load")
            for r in range(RANKS)
        ]
        assert sum(routed) == 7 and min(routed) > 0  # no voice, equal loads: taking turns over both ranks
        assert value(samples, "polyvox_engine_up", rank="0") == 1
        names = family_names(first_url)
        assert len(names) == len(set(names)), Counter(names).most_common(3)
        assert "polyvox_engine_routed_requests" in names
        # the process collector describes the process that answers, once (its files cannot add up)
        assert value(samples, "process_resident_memory_bytes") > 0
        assert {"process_cpu_seconds", "python_info"} <= set(names)


def test_a_single_process_exports_its_counts_as_before(serve):
    url = serve(RoutedFake())
    for n in range(3):
        assert httpx.post(f"{url}/v1/audio/speech", json={"input": f"request {n}"}).status_code == 200

    text = httpx.get(f"{url}/metrics").text
    samples = parse(text)
    assert value(samples, "polyvox_requests_total", **SPEECH) == 3
    assert ("polyvox_requests_created", tuple(sorted(SPEECH.items()))) in samples
    assert samples[("polyvox_requests_in_flight", ())] == 0  # one series, without a pid label
    routed = [
        value(samples, "polyvox_engine_routed_requests_total", rank=str(r), reason="load")
        for r in range(RANKS)
    ]
    assert sum(routed) == 3
    names = [family.name for family in text_string_to_metric_families(text)]
    assert len(names) == len(set(names)), Counter(names).most_common(3)
    touched = {"polyvox_engine_routed_requests", "polyvox_requests_in_flight", "polyvox_cache_entries"}
    assert touched <= set(names)

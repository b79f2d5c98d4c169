"""`polyvox serve --api-server-count 2` without `lexicon_path` (the embedded voice: each API process runs
its own): a lexicon entry added through whichever process takes the `POST` is the lexicon of both, read
on fresh connections the kernel deals to either and through each process in turn, spoken by both (the
characters spoken, as SSE's usage counts them after the front end) and one audio cache entry for both
(it was held by the one process that took it: 10 of 20 reads showed it)."""

from __future__ import annotations

import json

import httpx

from engine.processes import engine_pids
from helpers.connection_owners import through
from helpers.serve_process import polyvox_serve

LEXICON_READ = b"GET /admin/lexicon HTTP/1.1\r\nHost: polyvox\r\nConnection: close\r\n\r\n"
ENTRY = {"term": "Zork", "say": "Hello there", "case_sensitive": False}


def terms(answer: httpx.Response) -> list[dict]:
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def characters_spoken(url: str, text: str) -> int:
    """SSE's `input_tokens`: the characters spoken once the text front end (the lexicon) had the text."""
    body = {"model": "tts-1", "voice": "alloy", "input": text, "stream_format": "sse", "cache": False}
    with httpx.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=60) as answer:
        assert answer.status_code == 200, answer.read()
        events = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "speech.audio.done", events[-1]
    return events[-1]["usage"]["input_tokens"]


def cache_status(url: str, text: str) -> str:
    body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "wav", "stream": False}
    answer = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.headers["x-cache"]


def test_a_lexicon_entry_added_through_one_api_process_is_every_processs(tmp_path) -> None:
    flags = ("--api-server-count", "2", "--voices-dir", str(tmp_path / "voices"),
             "--cache-enabled", "--cache-dir", str(tmp_path / "cache"), "--log-level", "warning")  # fmt: skip
    with polyvox_serve(*flags) as (launcher, url):
        processes = engine_pids(launcher.pid)
        assert len(processes) == 2  # two API processes, no engine ranks
        added = httpx.post(f"{url}/admin/lexicon", json={"term": "Zork", "say": "Hello there"})
        assert added.status_code == 201, added.text

        reads = [terms(httpx.get(f"{url}/admin/lexicon")) for _ in range(20)]  # a fresh connection each
        assert all(ENTRY in read for read in reads), reads
        for pid in processes:  # and through each process, whichever took the POST
            answer = through(url, pid, processes, LEXICON_READ)
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head
            assert ENTRY in json.loads(body)["data"]
        spoken = [characters_spoken(url, "Zork.") for _ in range(8)]
        assert spoken == [len("Hello there.")] * 8  # its spoken form, whichever process speaks
        assert cache_status(url, "Zork, again.") == "MISS"
        assert [cache_status(url, "Zork, again.") for _ in range(8)] == ["HIT"] * 8  # one key for both

        deleted = httpx.request("DELETE", f"{url}/admin/lexicon", json={"term": "Zork"})
        assert deleted.status_code == 200, deleted.text
        assert all(ENTRY not in terms(httpx.get(f"{url}/admin/lexicon")) for _ in range(10))

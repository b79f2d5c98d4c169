"""The access line of `polyvox serve`: one per HTTP request, logged once its answer has been sent, its
duration, status, bytes (of a stream: every chunk, counted once it ended) and, for speech, voice,
format, cache outcome and time to first audio as keys of a JSON log line (and after the request line
in a text log)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import openai
import pytest

from helpers.audio import decode
from helpers.serve_process import polyvox_serve


@dataclass
class Run:
    answers: dict[str, httpx.Response] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def access(self, request_id: str) -> list[dict]:
        entries = [json.loads(line) for line in self.lines if line.strip()]
        return [e for e in entries if e["logger"] == "polyvox.access" and e.get("request_id") == request_id]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The embedded voice with its cache: the same speech twice (a miss, then a hit; streamed), one not
    streamed, a playground file and an unknown voice, each with its own X-Request-ID; the JSON log."""
    result = Run()
    cache = tmp_path_factory.mktemp("access-cache")
    with polyvox_serve("--log-format", "json", "--cache-enabled", "--cache-dir", str(cache)) as (proc, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        for name in ("miss", "hit"):
            spoken = client.audio.speech.with_raw_response.create(
                model="tts-1",
                voice="alloy",
                input="Hello there.",
                response_format="wav",
                extra_headers={"X-Request-ID": name},
            )
            result.answers[name] = spoken.http_response
        with httpx.Client(base_url=url, timeout=60) as http:
            whole = {"input": "A whole answer.", "voice": "echo", "response_format": "pcm", "stream": False}
            result.answers["whole"] = http.post(
                "/v1/audio/speech", json=whole, headers={"X-Request-ID": "whole"}
            )
            result.answers["asset"] = http.get("/ui/assets/style.css", headers={"X-Request-ID": "asset"})
            result.answers["unknown"] = http.post(
                "/v1/audio/speech",
                json={"input": "x", "voice": "nobody"},
                headers={"X-Request-ID": "unknown"},
            )
        proc.terminate()
        output, _ = proc.communicate(timeout=60)
    result.lines = output.splitlines()
    yield result


def test_a_speech_request_s_access_line_has_its_fields_as_keys(run: Run) -> None:
    answer = run.answers["miss"]
    assert answer.status_code == 200
    samples, _ = decode(answer.content)
    assert samples.size > 0
    [line] = run.access("miss")
    assert line["method"] == "POST" and line["path"] == "/v1/audio/speech" and line["status"] == 200
    assert line["bytes"] == len(answer.content)
    assert line["voice"] == "alloy" and line["format"] == "wav" and line["cache"] == "MISS"
    assert line["stream"] is True  # polyvox streams unless asked not to
    assert 0 < line["first_audio_s"] <= line["duration_s"]


def test_the_cache_outcome_is_the_answer_s_x_cache(run: Run) -> None:
    [line] = run.access("hit")
    assert run.answers["hit"].headers["x-cache"] == "HIT" == line["cache"]
    assert line["bytes"] == len(run.answers["hit"].content) == len(run.answers["miss"].content)


def test_an_answer_not_streamed_says_so(run: Run) -> None:
    answer = run.answers["whole"]
    assert answer.status_code == 200 and len(answer.content) > 0
    [line] = run.access("whole")
    assert line["stream"] is False and line["format"] == "pcm" and line["voice"] == "echo"
    assert line["bytes"] == len(answer.content)
    assert 0 < line["first_audio_s"] <= line["duration_s"]


def test_other_requests_have_no_speech_fields(run: Run) -> None:
    [asset] = run.access("asset")
    assert asset["status"] == 200 and asset["bytes"] == len(run.answers["asset"].content) > 0
    assert asset["duration_s"] > 0
    [unknown] = run.access("unknown")
    assert unknown["status"] == 400 and unknown["bytes"] == len(run.answers["unknown"].content)
    for line in (asset, unknown):
        assert not {"voice", "format", "cache", "first_audio_s"} & line.keys(), line


def test_uvicorn_s_own_access_line_is_off(run: Run) -> None:
    entries = [json.loads(line) for line in run.lines if line.strip()]
    assert not [e for e in entries if e["logger"] == "uvicorn.access"]
    # one access line per request, the readiness probes' included
    assert len([e for e in entries if e["logger"] == "polyvox.access" and e["path"] == "/ready"]) >= 1


def test_a_text_log_s_access_line_says_the_same_after_the_request_line() -> None:
    with polyvox_serve("--no-cache-enabled") as (proc, url):
        body = {"input": "Hello.", "voice": "alloy", "response_format": "mp3", "stream": False}
        answer = httpx.post(
            f"{url}/v1/audio/speech", json=body, headers={"X-Request-ID": "text-line"}, timeout=60
        )
        assert answer.status_code == 200
        proc.terminate()
        output, _ = proc.communicate(timeout=60)
    [line] = [line for line in output.splitlines() if "polyvox.access" in line and "[text-line]" in line]
    pattern = (
        rf'"POST /v1/audio/speech HTTP/1.1" 200 [0-9.]+s {len(answer.content)}B '
        r"voice=alloy format=mp3 stream=false cache=DISABLED first_audio_s=[0-9.]+s$"
    )
    assert re.search(pattern, line), line

"""A client's `X-Request-ID` on `polyvox serve` (embedded voice, JSON logs captured): a valid one is
echoed in the answer, errors included, and names the request's log lines; an invalid one (too long,
spaces, characters outside `[A-Za-z0-9_.:-]`) is replaced by a fresh id and never reaches the logs."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import openai
import pytest

from helpers.audio import decode
from helpers.serve_process import polyvox_serve

pytest.importorskip("piper")

GOOD = "trace-42_a.b:c"
LONGEST = "y" * 128
BAD = ["x" * 129, "two words", "tab\there", "abc%0d%0aforged: line", 'quote"d', "semi;colon"]
FRESH = re.compile(r"[0-9a-f]{32}")


class Run:
    def __init__(self) -> None:
        self.answers: dict[str, httpx.Response] = {}
        self.spoken: bytes = b""
        self.log: list[dict] = []


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    """One server: a speech request and errors with the good id, requests with bad ids; its log."""
    result = Run()
    with polyvox_serve("--no-cache-enabled", "--log-format", "json") as (proc, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        speech = client.audio.speech.with_raw_response.create(
            model="tts-1",
            voice="alloy",
            input="Hello there.",
            response_format="wav",
            extra_headers={"X-Request-ID": GOOD},
        )
        result.answers["speech"] = speech.http_response
        result.spoken = speech.content
        with httpx.Client(base_url=url) as http:
            result.answers["400"] = http.post(
                "/v1/audio/speech", json={"input": ""}, headers={"X-Request-ID": GOOD}
            )
            result.answers["404"] = http.get("/v1/audio/voices/no-such-voice", headers={"X-Request-ID": GOOD})
            result.answers["longest"] = http.get("/v1/models", headers={"X-Request-ID": LONGEST})
            for i, bad in enumerate(BAD):
                result.answers[f"bad{i}"] = http.get("/v1/models", headers={"X-Request-ID": bad})
        proc.terminate()
        output, _ = proc.communicate(timeout=60)
    result.log = [json.loads(line) for line in output.splitlines() if line.strip()]
    yield result


def test_a_valid_id_is_echoed_and_names_the_request_s_log_lines(run: Run) -> None:
    speech = run.answers["speech"]
    assert speech.status_code == 200 and speech.headers["x-request-id"] == GOOD
    samples, rate = decode(run.spoken)
    assert samples.size / rate > 0.3
    mine = [e for e in run.log if e.get("request_id") == GOOD]
    access = [e for e in mine if e["logger"] == "polyvox.access"]
    assert {(e["path"], e["status"]) for e in access} == {
        ("/v1/audio/speech", 200),
        ("/v1/audio/speech", 400),
        ("/v1/audio/voices/no-such-voice", 404),
    }
    assert any(e["message"].startswith("speech ") for e in mine), mine  # the synthesis's own line


def test_error_answers_echo_the_id(run: Run) -> None:
    for name in ("400", "404"):
        answer = run.answers[name]
        assert answer.status_code == int(name) and "error" in answer.json()
        assert answer.headers["x-request-id"] == GOOD


def test_an_id_of_128_characters_is_kept(run: Run) -> None:
    assert run.answers["longest"].headers["x-request-id"] == LONGEST


def test_an_invalid_id_is_replaced_by_a_fresh_one(run: Run) -> None:
    given = [run.answers[f"bad{i}"].headers["x-request-id"] for i in range(len(BAD))]
    assert all(FRESH.fullmatch(request_id) for request_id in given), given
    assert len(set(given)) == len(BAD)  # one fresh id per request
    logged = {e.get("request_id") for e in run.log if e.get("path") == "/v1/models"}
    assert logged == {*given, LONGEST}
    text = json.dumps(run.log)
    for bad in BAD:
        assert json.dumps(bad)[1:-1] not in text

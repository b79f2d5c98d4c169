"""Every series the shipped Grafana dashboard queries has samples in `/metrics` of a running server:
the tiny random VoxCPM2 checkpoint in its engine process, loaded on demand, its state in a private
Redis, after the traffic that makes each series appear (speech, an unknown voice, a Redis outage). A
panel naming a series no server exports graphs nothing, and one naming the wrong series graphs a flat
line (as `polyvox_engine_restarts_total` did for crashes of engine processes). The same server's
engine step time and batch size, as histograms."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import openai
import pytest

from deploy.tools import DEPLOY
from helpers.audio import decode
from helpers.metrics import parse, value
from helpers.redis_server import RedisServer, private_redis
from helpers.serve_process import polyvox_serve

pytestmark = pytest.mark.timeout(300)

# load_on_demand: the first speech request loads the engine, so the cold-start series have samples
TINY = ("--random-weights", "tiny", "--device", "cpu", "--num-kv-blocks", "256", "--load-on-demand")
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "polyvox.json"
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SELECTED = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{")


def queried_series(dashboard: dict) -> set[str]:
    """The series the dashboard's panels and variables query, by name."""
    names: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            selected = _SELECTED.findall(_STRING.sub('""', target["expr"]))
            assert selected, f"panel {panel['title']!r}: a series without a selector in {target['expr']!r}"
            names |= set(selected)
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            names |= set(re.findall(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)", variable["definition"]))
    return names


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with private_redis() as server:
        yield server


@pytest.fixture(scope="module")
def scraped(redis: RedisServer) -> Iterator[dict]:
    """A tiny server's /metrics (`helpers.metrics.parse`) after speech, an error and a Redis outage."""
    with polyvox_serve(*TINY, "--log-level", "warning", "--state-url", redis.url) as (_, url):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        for _ in range(2):  # the second is served from the audio cache
            spoken = client.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.")
            samples, _rate = decode(spoken.content)
            assert samples.size > 0
        unknown = {"input": "Hello.", "voice": "nobody"}  # an error answered: polyvox_errors_total
        assert httpx.post(f"{url}/v1/audio/speech", json=unknown, timeout=30).status_code == 400
        redis.stop()
        try:  # a cache lookup in Redis fails: polyvox_state_errors_total; the answer is still served
            body = {"input": "Hello there.", "voice": "alloy", "response_format": "wav"}
            assert httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120).status_code == 200
        finally:
            redis.start()
        yield parse(httpx.get(f"{url}/metrics").text)


@pytest.fixture(scope="module")
def exported(scraped: dict) -> set[str]:
    return {name for name, _labels in scraped}


def test_the_dashboard_queries_series_a_running_server_exports(exported: set[str]) -> None:
    queried = queried_series(json.loads(DASHBOARD.read_text()))
    assert len(queried) > 25
    assert queried <= exported, sorted(queried - exported)


def test_the_dashboard_graphs_engine_ranks_routing_step_histograms_and_cold_starts() -> None:
    queried = queried_series(json.loads(DASHBOARD.read_text()))
    expected = {
        "polyvox_engine_rank_restarts_total",
        "polyvox_engine_up",
        "polyvox_engine_routed_requests_total",
        "polyvox_engine_rerouted_requests_total",
        "polyvox_engine_step_duration_seconds_bucket",
        "polyvox_engine_step_batch_size_bucket",
        "polyvox_engine_loads_total",
        "polyvox_engine_cold_start_seconds",
    }
    assert expected <= queried, sorted(expected - queried)


def buckets(samples: dict, name: str) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) of rank 0's histogram `name`, by bound."""
    found = [
        (float(dict(labels)["le"]), count)
        for (sample, labels), count in samples.items()
        if sample == f"{name}_bucket" and dict(labels)["rank"] == "0"
    ]
    return sorted(found)


def test_engine_step_time_and_batch_size_are_histograms_of_every_step(scraped: dict) -> None:
    steps = value(scraped, "polyvox_engine_steps_total", rank="0")
    assert steps > 0
    for name in ("polyvox_engine_step_duration_seconds", "polyvox_engine_step_batch_size"):
        assert value(scraped, f"{name}_count", rank="0") == steps
        counts = [count for _, count in buckets(scraped, name)]
        assert counts == sorted(counts) and counts[-1] == steps  # cumulative, +Inf holds them all
    # one request at a time: every step made one patch
    assert dict(buckets(scraped, "polyvox_engine_step_batch_size"))[1.0] == steps
    patches = value(scraped, "polyvox_engine_patches_total", rank="0")
    assert value(scraped, "polyvox_engine_step_batch_size_sum", rank="0") == patches
    step_time = value(scraped, "polyvox_engine_step_duration_seconds_sum", rank="0")
    assert step_time == pytest.approx(value(scraped, "polyvox_engine_step_seconds_mean", rank="0") * steps)
    # the gauges stay, under their names
    assert value(scraped, "polyvox_engine_step_seconds", rank="0") > 0
    assert value(scraped, "polyvox_engine_batch_size", rank="0") == 1

"""Three replicas of the embedded voice sharing one Redis behind nginx (the shipped upstream
configuration): a cached answer made by one is a HIT on the others, a lexicon edit reaches all, a
Redis outage costs only the cache (and changes to shared state, refused with a reason), and sharing
resumes when Redis returns. Real processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import redis

from deploy.cluster import Cluster, cluster, eventually
from helpers.metrics import scrape, value

pytest.importorskip("polyvox.backends.embedded")
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Iterator[Cluster]:
    with cluster(tmp_path_factory.mktemp("cluster"), []) as running:
        yield running


def speak(url: str, text: str, **headers: str) -> httpx.Response:
    body = {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "wav"}
    response = httpx.post(f"{url}/v1/audio/speech", json=body, headers=headers, timeout=120)
    assert response.status_code == 200, response.text
    return response


def test_a_cached_answer_made_by_one_replica_is_a_hit_on_every_other(shared):
    first, *others = shared.replicas
    made = speak(first.url, "The cache is shared by every replica.")
    assert made.headers["x-cache"] == "MISS"
    for replica in others:
        again = speak(replica.url, "The cache is shared by every replica.")
        assert again.headers["x-cache"] == "HIT"
        assert again.content == made.content
    assert speak(shared.url, "The cache is shared by every replica.").headers["x-cache"] == "HIT"


def test_a_lexicon_edit_through_the_balancer_reaches_every_replica(shared):
    added = httpx.post(f"{shared.url}/admin/lexicon", json={"term": "polyvox", "say": "polly vox"})
    assert added.status_code in (200, 201), added.text
    for replica in shared.replicas:
        eventually(
            lambda r=replica: any(
                item["term"] == "polyvox" for item in httpx.get(f"{r.url}/admin/lexicon").json()["data"]
            ),
            f"the lexicon edit on {replica.url}",
        )


def state_up(url: str) -> float:
    return value(scrape(url), "polyvox_state_up")


def test_redis_down_speech_goes_on_changes_are_refused_and_sharing_resumes_after(shared):
    shared.redis.stop()
    for replica in shared.replicas:
        eventually(lambda r=replica: state_up(r.url) == 0.0, f"{replica.url} noticing Redis is gone")
    outcomes = [speak(shared.url, f"Redis is away, request {i}.").headers["x-cache"] for i in range(9)]
    assert outcomes == ["MISS"] * 9  # served, without the shared cache
    refused = httpx.post(f"{shared.url}/admin/lexicon", json={"term": "nginx", "say": "engine x"})
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == "state_unavailable" and "redis://127.0.0.1" in error["message"]
    assert all(
        sum(v for (name, _), v in scrape(r.url).items() if name == "polyvox_state_errors_total") > 0
        for r in shared.replicas
    )

    shared.redis.start()  # the same port, empty: no persistence
    for replica in shared.replicas:
        eventually(lambda r=replica: state_up(r.url) == 1.0, f"{replica.url} finding Redis again")
    first, second, _ = shared.replicas
    assert speak(first.url, "Redis is back.").headers["x-cache"] == "MISS"
    assert speak(second.url, "Redis is back.").headers["x-cache"] == "HIT"
    # the replicas published the lexicon they held into the emptied Redis...
    store = redis.Redis.from_url(shared.redis.url)
    eventually(lambda: store.hexists("polyvox:lexicon:entries", "polyvox"), "the lexicon back in Redis")
    # ...and an edit made now reaches every replica again
    added = httpx.post(f"{shared.url}/admin/lexicon", json={"term": "nginx", "say": "engine x"})
    assert added.status_code in (200, 201), added.text
    for replica in shared.replicas:
        eventually(
            lambda r=replica: any(
                item["term"] == "nginx" for item in httpx.get(f"{r.url}/admin/lexicon").json()["data"]
            ),
            f"the new lexicon edit on {replica.url}",
        )

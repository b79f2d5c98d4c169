"""Two tiny random-weight VoxCPM2 replicas (cloning needs VoxCPM2) sharing one Redis behind nginx:
a voice uploaded through the balancer speaks at once on every replica, asked on its own port, and
once deleted through the balancer it is refused at once by every replica (they sync in the
background only every 60 s: what a client wrote is what any replica reads next); the metrics the
Grafana dashboard and the autoscaler read are the ones a replica exports. (Two are enough to show
what one replica hands another through Redis; the embedded-voice cluster runs three.
test_cluster_read_your_writes asks many such pairs of a fake engine.)"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from deploy.cluster import Cluster, cluster
from deploy.tools import DEPLOY
from helpers.audio import decode
from voices.clips import flac_clip

pytestmark = pytest.mark.timeout(900)

TINY = ["--random-weights", "tiny", "--device", "cpu"]


@pytest.fixture(scope="module")
def tiny_cluster(tmp_path_factory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("tiny-cluster")
    with cluster(tmp, TINY, replicas=2, sync_interval_s=60) as running:
        yield running


def voice_card(url: str, voice: str) -> dict | None:
    response = httpx.get(f"{url}/v1/audio/voices/{voice}", timeout=10)
    return response.json() if response.status_code == 200 else None


def speak(url: str, voice: str) -> httpx.Response:
    body = {"model": "voxcpm2", "input": "Hello there.", "voice": voice, "response_format": "wav", "seed": 7}
    # no-cache: each replica synthesises with the voice itself instead of answering from Redis
    return httpx.post(f"{url}/v1/audio/speech", json=body, headers={"Cache-Control": "no-cache"}, timeout=120)


def test_a_voice_uploaded_through_the_balancer_speaks_at_once_on_every_replica_until_deleted(tiny_cluster):
    created = httpx.post(
        f"{tiny_cluster.url}/v1/audio/voices",
        data={"name": "shared-anna", "consent": "true", "transcript": "A short test clip."},
        files={"audio": ("anna.flac", flac_clip(1.5, pitch=150.0))},
        timeout=60,
    )
    assert created.status_code == 201, created.text
    prompt_hash = created.json()["voice_prompt_hash"]

    spoken = []
    for replica in tiny_cluster.replicas:  # one of them is not the replica that stored it
        response = speak(replica.url, "shared-anna")
        assert response.status_code == 200, response.text
        samples, rate = decode(response.content)
        assert rate == 24000 and samples.size > 0 and np.isfinite(samples).all()
        spoken.append(samples)
        assert voice_card(replica.url, "shared-anna")["voice_prompt_hash"] == prompt_hash
    for other in spoken[1:]:
        np.testing.assert_allclose(other, spoken[0], atol=2e-4)  # the same voice, the same model

    deleted = httpx.delete(f"{tiny_cluster.url}/v1/audio/voices/shared-anna", timeout=30)
    assert deleted.status_code == 200, deleted.text
    for replica in tiny_cluster.replicas:  # each had spoken with it
        refused = speak(replica.url, "shared-anna")
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "voice_not_found"
        assert voice_card(replica.url, "shared-anna") is None


def exported_sample_names(url: str) -> set[str]:
    """Every sample name a replica's /metrics can carry, from the families it declares."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    names = set()
    for family in text_string_to_metric_families(text):
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}.get(family.type, [""])
        names |= {family.name + suffix for suffix in suffixes}
    return names


def test_the_dashboard_and_the_autoscaler_read_metrics_a_replica_exports(tiny_cluster):
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "polyvox.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    used = {name for expr in exprs for name in re.findall(r"\b(polyvox_[a-z_]+)\{", expr)}
    adapter = (DEPLOY / "kubernetes" / "monitoring" / "prometheus-adapter-values.yaml").read_text()
    used |= set(re.findall(r"seriesQuery: '(polyvox_[a-z_]+)\{", adapter))
    # exported only with idle_unload_s or load_on_demand, which these replicas do not set
    # (tests/deploy/test_dashboard_series.py reads them from a server that does)
    cold_starts = ("loads_total", "unloads_total", "cold", "cold_start_seconds")
    used -= {f"polyvox_engine_{name}" for name in cold_starts}
    assert len(used) > 20
    exported = exported_sample_names(tiny_cluster.replicas[0].url)
    assert used <= exported, sorted(used - exported)

"""deploy/compose.yaml (and its GPU override) is a valid Compose file, and its parts agree: every
polyvox replica is in nginx's upstream and in Prometheus' targets, has its own GPU, and stops more
slowly than it drains."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from deploy.tools import DEPLOY
from helpers.nginx import upstream_servers
from polyvox.settings import Settings

COMPOSE = DEPLOY / "compose.yaml"
GPU = DEPLOY / "compose.gpu.yaml"


def compose_command() -> list[str]:
    """Compose v2 (`docker compose`) where the plugin is installed, else v1 (`docker-compose`)."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy is None:
        pytest.skip("neither `docker compose` nor docker-compose installed (Debian package docker-compose)")
    return [legacy]


@pytest.mark.parametrize("files", [[COMPOSE], [COMPOSE, GPU]], ids=["cpu", "gpu"])
def test_compose_config_is_valid(files):
    flags = [arg for path in files for arg in ("-f", str(path))]
    result = subprocess.run(
        [*compose_command(), *flags, "config"], capture_output=True, text=True, timeout=60, cwd=DEPLOY
    )
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert {"nginx", "redis", "prometheus", "grafana"} <= set(services)


def replicas(document: dict) -> list[str]:
    return sorted(name for name in document["services"] if re.fullmatch(r"polyvox-\d+", name))


def test_every_replica_is_balanced_scraped_and_on_its_own_gpu():
    compose = yaml.safe_load(COMPOSE.read_text())
    names = replicas(compose)
    assert len(names) >= 2
    upstream = upstream_servers((DEPLOY / "nginx" / "compose.conf").read_text())
    assert sorted(upstream) == [f"{name}:8000" for name in names]
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    targets = [t for job in prometheus["scrape_configs"] for c in job["static_configs"] for t in c["targets"]]
    assert sorted(targets) == [f"{name}:8000" for name in names]
    gpu = yaml.safe_load(GPU.read_text())
    assert replicas(gpu) == names
    devices = [
        tuple(device["device_ids"])
        for name in names
        for device in gpu["services"][name]["deploy"]["resources"]["reservations"]["devices"]
    ]
    assert len(set(devices)) == len(names), "two replicas share a GPU"


def test_replicas_share_redis_and_stop_after_their_drain():
    compose = yaml.safe_load(COMPOSE.read_text())
    grace = Settings.model_fields["shutdown_grace_s"].default
    for name in replicas(compose):
        service = compose["services"][name]
        env = service["environment"]
        assert env["POLYVOX_STATE_URL"].startswith("redis://redis:")
        drain = float(env.get("POLYVOX_SHUTDOWN_GRACE_S", grace))
        assert float(service["stop_grace_period"].rstrip("s")) > drain
    redis = " ".join(compose["services"]["redis"]["command"])
    # only entries with a TTL (the audio cache) may be evicted: voices have none
    assert "--maxmemory-policy volatile-lru" in redis

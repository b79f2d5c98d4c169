"""deploy/compose.yaml (and its GPU and TLS overrides) is a valid Compose file, and its parts agree:
every polyvox replica is in nginx's upstream and in Prometheus' targets, has its own GPU, and stops
more slowly than it drains. It is secure by default: no start without API keys, Redis' password and
Grafana's admin password, nothing but nginx published beyond this machine, and this release's image."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tomllib

import pytest
import yaml

from deploy.tools import DEPLOY, ROOT
from helpers.nginx import upstream_servers
from polyvox.settings import Settings

COMPOSE = DEPLOY / "compose.yaml"
GPU = DEPLOY / "compose.gpu.yaml"
TLS = DEPLOY / "compose.tls.yaml"
WYOMING = DEPLOY / "compose.wyoming.yaml"
SECRETS = {
    "POLYVOX_API_KEYS": "key-one,key-two",
    "POLYVOX_REDIS_PASSWORD": "0123abcd",
    "GRAFANA_ADMIN_PASSWORD": "grafana-secret",
}


@functools.cache
def compose_command() -> tuple[str, ...]:
    """Compose v2 (`docker compose`) where the plugin is installed, else v1 (`docker-compose`)."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return (docker, "compose")
    legacy = shutil.which("docker-compose")
    if legacy is None:
        pytest.skip("neither `docker compose` nor docker-compose installed (Debian package docker-compose)")
    return (legacy,)


def compose_config(files: list, **env: str) -> subprocess.CompletedProcess:
    """`compose config` on `files` with exactly `env` for the variables compose.yaml reads (the
    caller's own POLYVOX_* and GRAFANA_* variables left out). Run once for each set of files and
    variables: Compose v1 is a Python program (0.3 s of CPU a run), and several tests read the
    same configuration."""
    return _config(tuple(str(path) for path in files), tuple(sorted(env.items())))


@functools.cache
def _config(files: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> subprocess.CompletedProcess:
    flags = [arg for path in files for arg in ("-f", path)]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("POLYVOX_", "GRAFANA_"))}
    return subprocess.run(
        [*compose_command(), *flags, "config"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=DEPLOY,
        env={**base, **dict(env)},
    )


@pytest.mark.parametrize("files", [[COMPOSE], [COMPOSE, GPU]], ids=["cpu", "gpu"])
def test_compose_config_is_valid(files):
    result = compose_config(files, **SECRETS)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    assert {"nginx", "redis", "prometheus", "grafana"} <= set(services)


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_compose_refuses_to_start_without_each_secret(missing):
    given = {name: value for name, value in SECRETS.items() if name != missing}
    result = compose_config([COMPOSE], **given)
    assert result.returncode != 0
    assert f"set {missing}" in result.stderr  # the message says what to set
    empty = compose_config([COMPOSE], **given, **{missing: ""})
    assert empty.returncode != 0, f"an empty {missing} was accepted"


def test_keys_and_passwords_reach_the_services_that_need_them():
    services = yaml.safe_load(compose_config([COMPOSE, GPU], **SECRETS).stdout)["services"]
    for name in replicas({"services": services}):
        env = services[name]["environment"]
        assert env["POLYVOX_API_KEYS"] == "key-one,key-two"
        assert env["POLYVOX_STATE_URL"] == "redis://:0123abcd@redis:6379/0"
    command = services["redis"]["command"]
    assert command[command.index("--requirepass") + 1] == "0123abcd"
    grafana = services["grafana"]["environment"]
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"] == "grafana-secret"


def published(service: dict) -> list[tuple[str, int]]:
    """(host address, host port) of each port `service` publishes; v1 and v2 of Compose print them
    differently ("127.0.0.1:3000:3000/tcp", or a mapping)."""
    found = []
    for port in service.get("ports", []):
        if isinstance(port, dict):
            found.append((port.get("host_ip", "0.0.0.0"), int(port["published"])))
        else:
            parts = str(port).split("/")[0].split(":")
            found.append((parts[0] if len(parts) == 3 else "0.0.0.0", int(parts[-2])))
    return found


@pytest.mark.parametrize("files", [[COMPOSE], [COMPOSE, TLS]], ids=["http", "https"])
def test_only_nginx_is_published_beyond_this_machine(files, tmp_path):
    result = compose_config(files, **SECRETS, POLYVOX_TLS_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    public = {
        name for name, service in services.items() for host, _ in published(service) if host != "127.0.0.1"
    }
    assert public == {"nginx"}
    assert published(services["grafana"]) == [("127.0.0.1", 3000)]
    assert published(services["prometheus"]) == [("127.0.0.1", 9090)]


def test_wyoming_is_served_and_published_only_with_its_override():
    plain = yaml.safe_load(compose_config([COMPOSE], **SECRETS).stdout)["services"]
    assert all(10200 not in (port for _, port in published(service)) for service in plain.values())
    assert all("POLYVOX_WYOMING_PORT" not in service.get("environment", {}) for service in plain.values())
    result = compose_config([COMPOSE, WYOMING], **SECRETS)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    one = services["polyvox-1"]
    assert one["environment"]["POLYVOX_WYOMING_PORT"] == "10200"
    assert one["environment"]["POLYVOX_API_KEYS"] == "key-one,key-two"  # the base's environment kept
    assert published(one) == [("127.0.0.1", 10200)]  # this machine only, unless the operator says
    assert "POLYVOX_WYOMING_PORT" not in services["polyvox-2"]["environment"]
    lan = yaml.safe_load(
        compose_config([COMPOSE, WYOMING], **SECRETS, POLYVOX_WYOMING_BIND="192.0.2.7").stdout
    )
    assert published(lan["services"]["polyvox-1"]) == [("192.0.2.7", 10200)]


def test_the_tls_override_mounts_the_certificates_and_serves_443(tmp_path):
    assert compose_config([COMPOSE, TLS], **SECRETS).returncode != 0, (
        "started without a certificate directory"
    )
    result = compose_config([COMPOSE, TLS], **SECRETS, POLYVOX_TLS_DIR=str(tmp_path))
    nginx = yaml.safe_load(result.stdout)["services"]["nginx"]
    assert {port for _, port in published(nginx)} == {8080, 443}
    volumes = [v if isinstance(v, str) else f"{v['source']}:{v['target']}" for v in nginx["volumes"]]
    assert any(v.startswith(f"{tmp_path}:/etc/nginx/tls") for v in volumes)
    assert any(v.endswith("compose-tls.conf:/etc/nginx/conf.d/default.conf:ro") for v in volumes)


def version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_images_are_this_release_in_the_repository_the_operator_names():
    services = yaml.safe_load(compose_config([COMPOSE], **SECRETS).stdout)["services"]
    assert services["polyvox-1"]["image"] == f"polyvox:{version()}-cpu"
    gpu = compose_config([COMPOSE, GPU], **SECRETS, POLYVOX_IMAGE="registry.example.com/team/polyvox")
    services = yaml.safe_load(gpu.stdout)["services"]
    assert {services[name]["image"] for name in replicas({"services": services})} == {
        f"registry.example.com/team/polyvox:{version()}-cuda"
    }


def replicas(document: dict) -> list[str]:
    return sorted(name for name in document["services"] if re.fullmatch(r"polyvox-\d+", name))


def test_every_replica_is_balanced_scraped_and_on_its_own_gpu():
    compose = yaml.safe_load(COMPOSE.read_text())
    names = replicas(compose)
    assert len(names) >= 2
    for site in ("compose.conf", "compose-tls.conf"):
        upstream = upstream_servers((DEPLOY / "nginx" / site).read_text())
        assert sorted(upstream) == [f"{name}:8000" for name in names], site
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
        assert env["POLYVOX_STATE_URL"].startswith("redis://:${POLYVOX_REDIS_PASSWORD")
        drain = float(env.get("POLYVOX_SHUTDOWN_GRACE_S", grace))
        assert float(service["stop_grace_period"].rstrip("s")) > drain
    redis = " ".join(compose["services"]["redis"]["command"])
    assert "@redis:6379/" in env["POLYVOX_STATE_URL"]
    # only entries with a TTL (the audio cache) may be evicted: voices have none
    assert "--maxmemory-policy volatile-lru" in redis


@pytest.mark.parametrize("files", [[COMPOSE], [COMPOSE, GPU]], ids=["cpu", "gpu"])
def test_every_replica_takes_the_clients_address_from_nginx(files):
    """uvicorn believes X-Forwarded-For only from FORWARDED_ALLOW_IPS (default 127.0.0.1, never
    nginx's container address); tests/deploy/test_nginx_proxy.py runs the value through nginx."""
    result = compose_config(files, **SECRETS)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    for name in replicas({"services": services}):
        assert services[name]["environment"]["FORWARDED_ALLOW_IPS"] == "*", name

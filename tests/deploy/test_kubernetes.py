"""Every Kubernetes overlay renders with `kubectl kustomize` and validates against the Kubernetes
schemas (kubernetes-validate); the Deployment's probes, drain timing and autoscaling fit polyvox; it is
secure by default (keys and Redis' password from a Secret it cannot start without, NetworkPolicies, an
Ingress with TLS that leaves /metrics inside) and pulls the image of this release."""

from __future__ import annotations

import functools
import os
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from deploy.tools import DEPLOY, ROOT, system_tool, venv_tool
from polyvox.settings import Settings

KUBERNETES = DEPLOY / "kubernetes"
OVERLAYS = sorted(path.name for path in (KUBERNETES / "overlays").iterdir())


@functools.cache
def render(overlay: str) -> str:
    kubectl = system_tool("kubectl", "kubectl (Kubernetes' apt repository)")
    result = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def resources(text: str) -> dict[tuple[str, str], dict]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in yaml.safe_load_all(text) if doc}


def test_there_are_gpu_and_cpu_overlays():
    assert {"gpu", "cpu"} <= set(OVERLAYS)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_and_validates(overlay, tmp_path: Path):
    rendered = tmp_path / f"{overlay}.yaml"
    rendered.write_text(render(overlay))
    result = subprocess.run(
        [venv_tool("kubernetes-validate"), "--strict", "--quiet", str(rendered)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    kinds = {kind for kind, _ in resources(rendered.read_text())}
    assert {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"} <= kinds


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_and_termination_let_the_drain_finish(overlay):
    docs = resources(render(overlay))
    pod = docs[("Deployment", "polyvox")]["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "polyvox")
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    command = container["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    config = next(doc for (kind, _), doc in docs.items() if kind == "ConfigMap")
    grace = float(
        config["data"].get("POLYVOX_SHUTDOWN_GRACE_S", Settings.model_fields["shutdown_grace_s"].default)
    )
    assert pod["terminationGracePeriodSeconds"] > float(command[1]) + grace


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_startup_probe_waits_for_the_model_and_readiness_tolerates_a_slow_answer(overlay):
    """The startup probe asks /ready, which is 503 until the engine can synthesise (/health is 200
    from the first second), for minutes; readiness takes a pod out after several misses, not one."""
    pod = server_pod(resources(render(overlay)))
    container = next(c for c in pod["containers"] if c["name"] == "polyvox")
    startup, readiness = container["startupProbe"], container["readinessProbe"]
    assert startup["httpGet"]["path"] == "/ready"
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300
    assert readiness["failureThreshold"] >= 3 and readiness["timeoutSeconds"] >= 5


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_pods_take_the_clients_address_from_the_ingress(overlay):
    docs = resources(render(overlay))
    config = next(doc for (kind, _), doc in docs.items() if kind == "ConfigMap")
    assert config["data"]["FORWARDED_ALLOW_IPS"] == "*"  # the NetworkPolicy admits only the ingress et al.


def test_gpu_overlay_asks_for_one_gpu_per_replica():
    pod = resources(render("gpu"))[("Deployment", "polyvox")]["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    models = next(v for v in pod["volumes"] if v["name"] == "models")
    assert "persistentVolumeClaim" in models and "emptyDir" not in models


def test_hpa_scales_on_the_metric_the_adapter_serves():
    hpa = resources(render("cpu"))[("HorizontalPodAutoscaler", "polyvox")]
    metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    values = yaml.safe_load((KUBERNETES / "monitoring" / "prometheus-adapter-values.yaml").read_text())
    served = [rule["name"]["as"] for rule in values["rules"]["custom"]]
    assert metric == "polyvox_queue_depth" and metric in served
    series = values["rules"]["custom"][0]["seriesQuery"]
    assert series.startswith("polyvox_queue_depth{")


def server_pod(docs: dict) -> dict:
    return docs[("Deployment", "polyvox")]["spec"]["template"]["spec"]


def env_of(container: dict) -> dict[str, dict]:
    return {item["name"]: item for item in container.get("env", [])}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_keys_and_the_redis_password_come_from_a_secret_the_pods_cannot_start_without(overlay):
    docs = resources(render(overlay))
    env = env_of(server_pod(docs)["containers"][0])
    keys = env["POLYVOX_API_KEYS"]["valueFrom"]["secretKeyRef"]
    assert keys["name"] == "polyvox-secrets" and not keys.get("optional", False)
    password = env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert password["name"] == "polyvox-secrets" and not password.get("optional", False)
    assert env["POLYVOX_STATE_URL"]["value"] == "redis://:$(REDIS_PASSWORD)@polyvox-redis:6379/0"
    # nothing configures the state URL without the password behind the Deployment's back
    assert all(
        "POLYVOX_STATE_URL" not in doc.get("data", {})
        for (kind, _), doc in docs.items()
        if kind == "ConfigMap"
    )
    redis = docs[("Deployment", "polyvox-redis")]["spec"]["template"]["spec"]["containers"][0]
    args = redis["args"]
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    assert env_of(redis)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "polyvox-secrets"
    assert ("Secret", "polyvox-secrets") not in docs, "a Secret in git would hold the same keys everywhere"
    for doc in docs.values():
        for container in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            anonymous = env_of(container).get("GF_AUTH_ANONYMOUS_ENABLED", {}).get("value", "false")
            assert anonymous.lower() == "false"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policies_admit_the_api_from_chosen_places_and_redis_only_from_polyvox(overlay):
    docs = resources(render(overlay))
    server_labels = docs[("Deployment", "polyvox")]["spec"]["template"]["metadata"]["labels"]
    redis_labels = docs[("Deployment", "polyvox-redis")]["spec"]["template"]["metadata"]["labels"]
    api = docs[("NetworkPolicy", "polyvox")]["spec"]
    assert api["podSelector"]["matchLabels"].items() <= server_labels.items()
    assert api["policyTypes"] == ["Ingress"]
    peers = [peer for rule in api["ingress"] for peer in rule["from"]]
    assert peers and all(peer for peer in peers), "an empty peer would admit everyone"
    assert [port["port"] for rule in api["ingress"] for port in rule["ports"]] == ["http"]
    redis = docs[("NetworkPolicy", "polyvox-redis")]["spec"]
    assert redis["podSelector"]["matchLabels"].items() <= redis_labels.items()
    (rule,) = redis["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": server_labels}}]
    assert rule["ports"] == [{"port": "redis"}]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_ingress_serves_https_and_leaves_metrics_inside(overlay):
    ingress = resources(render(overlay))[("Ingress", "polyvox")]
    assert "cert-manager.io/cluster-issuer" in ingress["metadata"]["annotations"]
    (tls,) = ingress["spec"]["tls"]
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] in tls["hosts"] and tls["secretName"]
    paths = {(p["path"], p["pathType"]) for p in rule["http"]["paths"]}
    assert ("/v1", "Prefix") in paths and ("/ready", "Exact") in paths
    for path, kind in paths:
        routed = path == "/metrics" or (kind == "Prefix" and "/metrics".startswith(path.rstrip("/") + "/"))
        assert not routed, f"{path} ({kind}) would route /metrics"
    assert all(p["backend"]["service"]["name"] == "polyvox" for p in rule["http"]["paths"])


def version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.mark.parametrize(("overlay", "flavour"), [("cpu", "cpu"), ("gpu", "cuda")])
def test_each_overlay_deploys_this_releases_image(overlay, flavour):
    image = server_pod(resources(render(overlay)))["containers"][0]["image"]
    assert image == f"polyvox:{version()}-{flavour}"
    # the registry is named in one place: the overlay's `images:` entry
    kustomization = yaml.safe_load((KUBERNETES / "overlays" / overlay / "kustomization.yaml").read_text())
    (entry,) = kustomization["images"]
    assert entry["name"] == "polyvox" and entry["newTag"] == f"{version()}-{flavour}"


def test_the_wyoming_component_serves_the_port_only_where_an_overlay_names_it(tmp_path):
    for overlay in OVERLAYS:
        docs = resources(render(overlay))
        assert ("Service", "polyvox-wyoming") not in docs
        ports = server_pod(docs)["containers"][0]["ports"]
        assert [port["name"] for port in ports] == ["http"]
    relative = os.path.relpath(KUBERNETES, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {relative}/overlays/cpu\ncomponents:\n  - {relative}/components/wyoming\n"
    )
    kubectl = system_tool("kubectl", "kubectl (Kubernetes' apt repository)")
    result = subprocess.run(
        [kubectl, "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    docs = resources(result.stdout)
    container = server_pod(docs)["containers"][0]
    assert {"name": "wyoming", "containerPort": 10200} in container["ports"]
    env = env_of(container)
    assert (
        env["POLYVOX_WYOMING_PORT"]["value"] == "10200" and env["POLYVOX_WYOMING_HOST"]["value"] == "0.0.0.0"
    )
    service = docs[("Service", "polyvox-wyoming")]["spec"]
    assert service["ports"] == [{"name": "wyoming", "port": 10200, "targetPort": "wyoming"}]
    assert (
        service["selector"].items()
        <= docs[("Deployment", "polyvox")]["spec"]["template"]["metadata"]["labels"].items()
    )
    rules = docs[("NetworkPolicy", "polyvox")]["spec"]["ingress"]
    wyoming = [rule for rule in rules if rule["ports"] == [{"port": "wyoming"}]]
    assert wyoming == [
        {
            "from": [{"podSelector": {"matchLabels": {"polyvox.io/wyoming-client": "true"}}}],
            "ports": [{"port": "wyoming"}],
        }
    ]

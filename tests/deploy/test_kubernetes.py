"""Every Kubernetes overlay renders with `kubectl kustomize` and validates against the Kubernetes
schemas (kubernetes-validate); the Deployment's probes, drain timing and autoscaling fit polyvox."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest
import yaml

from deploy.tools import DEPLOY, system_tool, venv_tool
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
    assert config["data"]["POLYVOX_STATE_URL"].startswith("redis://")


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

"""What `/metrics` says about the server itself, through a real server: the process and Python it runs
in, readiness probes answered during start-up (not errors), and the playground's assets labelled by
their mount rather than `unmatched`."""

from __future__ import annotations

import threading

import httpx

from helpers.metrics import scrape, value


def summed(samples: dict, name: str) -> float:
    return sum(count for (sample, _), count in samples.items() if sample == name)


def test_metrics_describe_the_process_and_its_python(serve) -> None:
    samples = scrape(serve())
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "process_open_fds") > 0
    assert value(samples, "process_cpu_seconds_total") > 0
    python = [labels for (name, labels), _ in samples.items() if name == "python_info"]
    assert len(python) == 1 and dict(python[0])["implementation"] == "CPython"


def test_readiness_probes_during_start_up_are_not_counted_as_errors(serve) -> None:
    from polyvox.backends.fake import FakeBackend

    gate = threading.Event()
    url = serve(FakeBackend(ready_gate=gate), wait_ready=False)
    for _ in range(3):
        answer = httpx.get(f"{url}/ready")
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "engine_not_ready"
    gate.set()

    samples = scrape(url)
    assert value(samples, "polyvox_requests_total", route="/ready", method="GET", status="503") == 3
    assert summed(samples, "polyvox_errors_total") == 0
    # a real error is still counted
    assert httpx.get(f"{url}/v1/audio/voices/nobody").status_code == 404
    assert summed(scrape(url), "polyvox_errors_total") == 1


def test_the_playground_s_assets_are_labelled_by_their_mount(serve) -> None:
    url = serve()
    assert httpx.get(f"{url}/ui/assets/style.css").status_code == 200
    assert httpx.get(f"{url}/ui/assets/js/main.js").status_code == 200
    assert httpx.get(f"{url}/ui/assets/no-such-file.css").status_code == 404

    samples = scrape(url)
    assets = {"route": "/ui/assets", "method": "GET"}
    assert value(samples, "polyvox_requests_total", **assets, status="200") == 2
    assert value(samples, "polyvox_requests_total", **assets, status="404") == 1
    assert value(samples, "polyvox_request_duration_seconds_count", route="/ui/assets") == 3
    assert not any(dict(labels).get("route") == "unmatched" for (_, labels) in samples)

"""An engine that stops serving is restarted and the server keeps serving: the tone engine dying
outright, and the batching VoxCPM2 engine whose step loop gives up after failed steps in a row. A request
that arrives while it restarts waits for it, until its deadline."""

from __future__ import annotations

import time

import httpx

from helpers.metrics import scrape, value
from helpers.server import running_server
from polyvox.backends.fake import FakeBackend
from polyvox.server.app import create_app
from polyvox.settings import Settings

SPEECH = "/v1/audio/speech"


def wait_until(condition, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)


class DyingBackend(FakeBackend):
    """The tone engine (whose `die()` stops it serving as a crashed runtime would), counting its starts."""

    def __init__(self, failed_restarts: int = 0):
        super().__init__()
        self.starts = 0
        self.failed_restarts = failed_restarts

    async def start(self) -> None:
        self.starts += 1
        if self.starts > 1 and self.failed_restarts:
            self.failed_restarts -= 1
            raise RuntimeError("the device is still gone")
        await super().start()


def test_an_engine_that_stops_serving_is_restarted(serve) -> None:
    backend = DyingBackend(failed_restarts=1)
    url = serve(backend)
    assert httpx.post(f"{url}{SPEECH}", json={"input": "before"}).status_code == 200
    backend.die()
    wait_until(lambda: httpx.get(f"{url}/ready").status_code == 503, "/ready says it is down")
    # sent while it is down: waits for the restart (a failed try, then one that works) and is served
    waited = httpx.post(f"{url}{SPEECH}", json={"input": "while it is down"}, timeout=30)
    assert waited.status_code == 200, waited.text
    assert httpx.get(f"{url}/ready").status_code == 200
    assert backend.starts == 3  # the first start, a failed restart, then one that worked
    assert value(scrape(url), "polyvox_engine_restarts_total") == 1
    response = httpx.post(f"{url}{SPEECH}", json={"input": "after the restart", "response_format": "wav"})
    assert response.status_code == 200 and len(response.content) > 44


def test_a_request_waits_for_a_restarting_engine_only_until_its_deadline(serve) -> None:
    backend = DyingBackend(failed_restarts=1_000_000)  # it never comes back
    url = serve(backend, request_timeout_s=1.0)
    assert httpx.post(f"{url}{SPEECH}", json={"input": "before"}).status_code == 200
    backend.die()
    wait_until(lambda: httpx.get(f"{url}/ready").status_code == 503, "/ready says it is down")
    refused = httpx.post(f"{url}{SPEECH}", json={"input": "while it is down"}, timeout=30)
    assert refused.status_code == 503 and "Retry-After" in refused.headers
    assert refused.json()["error"]["code"] == "engine_not_ready"
    assert httpx.get(f"{url}/ready").json()["error"]["code"] == "engine_restarting"


def test_an_engine_that_never_started_is_not_restarted(serve) -> None:
    class Broken(DyingBackend):
        async def start(self) -> None:
            self.starts += 1
            raise RuntimeError("no weights here")

    backend = Broken()
    url = serve(backend, wait_ready=False)
    time.sleep(1.5)  # three supervisor rounds
    assert backend.starts == 1
    assert httpx.get(f"{url}/ready").json()["error"]["code"] == "engine_failed"


def test_voxcpm2_step_loop_that_gives_up_is_restarted_and_serves_again() -> None:
    from polyvox.backends.voxcpm import VoxCPMBackend
    from polyvox.core.async_core import MAX_CONSECUTIVE_FAILURES
    from polyvox.core.config import BatchingConfig
    from polyvox.models.voxcpm2.loaded_model import VoxCPM2

    # a small KV pool: the default on a CPU (cpu_kv_cache_bytes, 2 GiB) is seconds of zeroing per engine
    model = VoxCPM2.random("tiny", device="cpu", dtype="float32")
    backend = VoxCPMBackend(model, BatchingConfig(num_kv_blocks=256), max_patches=6)
    app = create_app(Settings(max_concurrent_requests=8), backend)
    with running_server(app) as url, httpx.Client(timeout=60) as client:
        broken = backend._step_loop

        def always_fails(chunks):
            raise RuntimeError("injected device fault")

        broken.core.runner.run = always_fails
        for _ in range(MAX_CONSECUTIVE_FAILURES):
            failed = client.post(f"{url}{SPEECH}", json={"input": "Hello there.", "response_format": "pcm"})
            if failed.status_code == 200:
                break  # the loop already gave up: the request waited for the restarted one
            assert failed.status_code == 500 and failed.json()["error"]["type"] == "server_error"
        wait_until(lambda: not broken.running, "the step loop gave up")
        wait_until(lambda: client.get(f"{url}/ready").status_code == 200, "the engine is ready again")
        assert backend._step_loop is not broken
        after = [
            client.post(f"{url}{SPEECH}", json={"input": f"Take {i}.", "response_format": "wav"})
            for i in range(2)
        ]
        assert all(r.status_code == 200 and len(r.content) > 44 for r in after)
        assert value(scrape(url), "polyvox_engine_restarts_total") == 1
        assert value(scrape(url), "polyvox_requests_in_flight") == 0

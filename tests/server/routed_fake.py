"""The fake engine behind two data-parallel ranks chosen by the real `Router`, reported as a batching
engine reports its ranks, so what `/metrics` exports per rank can be tested without a model; run as a
script it is one API process: `python routed_fake.py PORT`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from helpers.serve_process import free_port
from polyvox.backends.base import AudioStream, EngineRank, SynthesisRequest
from polyvox.backends.fake import FakeBackend
from polyvox.engine.router import Router, voice_key
from polyvox.server.app import create_app
from polyvox.settings import Settings

RANKS = 2
TESTS = Path(__file__).resolve().parents[1]


class RoutedFake(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.router = Router(RANKS)

    def generate(self, request: SynthesisRequest) -> AudioStream:
        self.router.choose([0] * RANKS, voice_key(request))
        return super().generate(request)

    def engine_ranks(self) -> list[EngineRank]:
        router = self.router
        return [EngineRank(True, None, 0, router.by_affinity[r], router.by_load[r]) for r in range(RANKS)]


@contextmanager
def routed_fake_process(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen, str]]:
    """This module run as an API process with `env` added, on a free port; yields (process, URL) once
    it is ready, and kills it on exit."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, str(port)],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _ready(url):
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the API process never became ready"
            time.sleep(0.05)
        yield proc, url
    finally:
        proc.kill()
        proc.wait()


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/ready").status_code == 200
    except httpx.TransportError:
        return False


if __name__ == "__main__":
    app = create_app(Settings(), RoutedFake())
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")

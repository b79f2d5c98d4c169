"""A tiny random VoxCPM2 served by the batching engine on a real loopback server, restartable on the
same voices directory (a fresh engine each time, as after a process restart)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest

from helpers.server import running_server
from polyvox.backends.factory import build_text_pipeline
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.core.config import BatchingConfig
from polyvox.models.voxcpm2.loaded_model import VoxCPM2
from polyvox.server.app import create_app
from polyvox.settings import Settings

MAX_PATCHES = 3  # every synthesis is three 160 ms patches: 0.48 s


@pytest.fixture(scope="session")
def tiny_model() -> VoxCPM2:
    return VoxCPM2.random("tiny", device="cpu", dtype="float32")


@pytest.fixture
def voxcpm_server(tiny_model, tmp_path) -> Callable[..., AbstractContextManager[str]]:
    """`with voxcpm_server(**settings) as url:` serves the tiny VoxCPM2 behind the text front end (as
    `polyvox serve` does) with voices in `tmp_path / "voices"` unless `voices_dir` is given;
    `voxcpm_server.engine` is the last server's VoxCPMBackend."""

    @contextmanager
    def serve(**overrides) -> Iterator[str]:
        overrides.setdefault("voices_dir", tmp_path / "voices")
        overrides.setdefault("voice_freeze_max_patches", 6)
        settings = Settings(**overrides)
        backend = VoxCPMBackend(
            tiny_model, BatchingConfig(max_num_seqs=32, num_kv_blocks=1024), max_patches=MAX_PATCHES
        )
        app = create_app(settings, backend, build_text_pipeline(settings, backend))
        serve.backend = backend  # the last server's model engine, for its batching stats
        with running_server(app) as url:
            yield url

    return serve

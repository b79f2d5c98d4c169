"""Shared fixtures: real uvicorn servers on loopback around a fake or the real embedded engine."""

from __future__ import annotations

import gc
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from helpers.kinds import heaviest_files_first, mark_kinds
from helpers.server import running_server
from helpers.ssl_context import share_one_ssl_context
from polyvox.backends.base import Backend
from polyvox.backends.fake import FakeBackend
from polyvox.runtime.heap import freeze_heap
from polyvox.server.app import create_app
from polyvox.settings import Settings

# The collector off while the tests are collected (every test module and all it imports: PyTorch, the
# server, the protocols' clients), then what collection built frozen, as polyvox's own processes do when
# they start (polyvox/runtime/heap.py): the collector's full passes over that heap were a fifth of each
# worker's CPU at collection and kept coming back while the tests ran (BENCHMARKS.md).
gc.disable()

# Tests start with the audio cache off (it is on by default and persists between runs); the cache's
# own tests turn it on with a temporary directory.
os.environ.setdefault("POLYVOX_CACHE_ENABLED", "false")
# Voices (uploads, frozen builtin prompts) go to a fresh directory per test run, never the user's.
os.environ.setdefault("POLYVOX_VOICES_DIR", tempfile.mkdtemp(prefix="polyvox-test-voices-"))
# A VoxCPM engine on the CPU sizes its KV cache from `cpu_kv_cache_bytes` (2 GiB): for the tiny random
# model, 131,072 blocks, a second of zeroing and 2 GiB resident in every engine a test starts, of which
# no test uses more than a few thousand. Tests that size it themselves (`num_kv_blocks`, or the
# model runner's own tests) are unchanged; these 8,192 blocks hold 131,072 positions.
os.environ.setdefault("POLYVOX_NUM_KV_BLOCKS", "8192")
# One OpenMP thread for PyTorch in every process (this one, and the engines, CLIs and scripts it starts):
# two workers run on two cores beside the processes they start, and OpenMP's extra threads spin while
# they wait for a core (tests/core/test_batching.py and tests/models/test_loaded_model.py took 66 s of
# CPU with PyTorch's default, 26 s with one). Servers use `torch_threads`, which this does not change.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# numba's functions (librosa's: the official VoxCPM2 code's reference reads, the pitch tests' constant-Q
# transform) compiled without LLVM's optimisation passes: on a new machine their cache is empty, and the
# tests that reach them took 30-33 s of CPU from cold and 24-25 s so; from a warm cache 14.6-14.7 s of
# wall either way (BENCHMARKS.md). numba reads this when it is first imported, which no plugin does
# before this file.
os.environ.setdefault("NUMBA_OPT", "0")
# httpx clients share one SSL context instead of each parsing the CA bundle (helpers/ssl_context.py).
share_one_ssl_context()


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """`serve(engine=None, wait_ready=True, **settings)` starts a server for this test; returns its URL."""
    with ExitStack() as stack:

        def start(backend: Backend | None = None, wait_ready: bool = True, **overrides) -> str:
            app = create_app(Settings(**overrides), backend or FakeBackend())
            return stack.enter_context(running_server(app, wait_ready=wait_ready))

        yield start


@pytest.fixture(scope="session")
def embedded_url() -> Iterator[str]:
    """One server for the session around the real embedded (piper) engine."""
    embedded = pytest.importorskip("polyvox.backends.embedded")
    app = create_app(Settings(max_concurrent_requests=8, max_queue=256), embedded.EmbeddedBackend())
    with running_server(app) as url:
        yield url


def pytest_sessionstart(session: pytest.Session) -> None:
    if session.config.pluginmanager.has_plugin("dsession"):  # xdist's controller: it collects nothing
        pytest_collection_finish()


def pytest_collection_finish() -> None:
    freeze_heap()
    gc.enable()


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks given here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test gets its kind (`unit`, `server`, `process`, ...: tests/helpers/kinds.py), and the files
    run heaviest kind first."""
    mark_kinds(items)
    heaviest_files_first(items)

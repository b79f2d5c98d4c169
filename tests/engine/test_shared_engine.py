"""One engine process, two clients: the launcher's `EngineClient` that owns it and an API process's
`ConnectedEngineClient` that only connects (what `api_server_count` builds). Requests from both share a
step and each gets its own audio, the same as alone; `Forget` drops a gone client's requests; the
connected client learns from its socket that the engine died (its request fails) and that the restarted
one serves, with the restart counted in the handshake."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import tempfile

import numpy as np
import pytest

from polyvox.backends.base import SynthesisRequest
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.engine.client import EngineClient, EngineDied
from polyvox.engine.connected import ConnectedEngineClient, peer_identity
from polyvox.settings import Settings

REQUEST = SynthesisRequest(text="Two clients, one engine.", seed=5, max_patches=5)
OTHER = SynthesisRequest(text="And something else entirely.", seed=6, max_patches=5)
ENDLESS = SynthesisRequest(text="This one goes on until it is dropped.", seed=1, max_patches=400)


async def _all(client, request: SynthesisRequest) -> np.ndarray:
    return np.concatenate([chunk async for chunk in client.generate(request)])


async def _until(condition, what: str, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.05)


async def _scenario(socket_dir: str) -> None:
    settings = Settings(random_weights="tiny", device="cpu", num_kv_blocks=256, torch_threads=1)
    backend = VoxCPMBackend.from_settings(settings, socket_dir)
    spec = backend.engine.specs[0]
    owner = EngineClient(0, spec, backend.options, socket_dir)
    connected = ConnectedEngineClient(0, owner.address)
    await owner.start()
    try:
        await connected.start()
        await asyncio.wait_for(connected.ready_signal.until(lambda: connected.up), 30)
        assert connected.up and connected.restarts == 0

        alone, other = await _all(owner, REQUEST), await _all(owner, OTHER)
        assert np.abs(alone - other).max() > 1e-2  # rows mixed up between clients would show
        shared = await asyncio.gather(_all(owner, OTHER), _all(connected, REQUEST), _all(connected, OTHER))
        # one step, three rows: each client got its own rows (batched, the same up to float rounding)
        for audio, expected in zip(shared, (other, alone, other), strict=True):
            np.testing.assert_allclose(audio, expected, atol=1e-5)

        # A client that never aborts (its process died): the engine keeps generating for it until the
        # owner says it is gone, then holds nothing; the owner's own request is untouched.
        endless = connected.generate(ENDLESS)
        await endless.__anext__()
        await _until(lambda: owner.stats is not None and owner.stats.running == 1, "the endless one runs")
        await owner.forget(peer_identity())
        await _until(lambda: owner.held == 0 and owner.stats.running == 0, "the engine dropped it")
        np.testing.assert_allclose(await _all(owner, REQUEST), alone, atol=1e-5)

        # kill -9 of the engine: the connected client's request fails, and it follows the restart.
        doomed = connected.generate(ENDLESS)
        await doomed.__anext__()
        os.kill(owner.handshake.pid, signal.SIGKILL)
        with pytest.raises(EngineDied):
            async for _ in doomed:
                pass
        await _until(lambda: connected.up, "the connected client sees the restarted engine", timeout=90)
        assert connected.restarts == owner.restarts == 1
        np.testing.assert_allclose(await _all(connected, REQUEST), alone, atol=1e-5)
    finally:
        await connected.stop()
        await owner.stop()


@pytest.mark.process  # polyvox starts the engine process
def test_two_clients_share_one_engine_process_forget_and_follow_its_restart():
    with tempfile.TemporaryDirectory(prefix="polyvox-shared-") as socket_dir:
        asyncio.run(_scenario(socket_dir))


def test_connected_ranks_need_the_launchers_socket_directory():
    from polyvox.engine.data_parallel import DataParallelEngine

    backend = VoxCPMBackend.from_settings(Settings(random_weights="tiny", device="cpu"))
    with pytest.raises(ValueError, match="socket_dir"):
        DataParallelEngine([dataclasses.replace(backend.engine.specs[0])], backend.options, connect=True)

"""An engine process reads the socket only between steps, so a request that came during a step is read
at the next boundary: its prompt is prepared then and it joins that very step, not the one after
(`EngineCoreProc.take`). The engine process's loop, run here by hand on a real tiny model and a real
socket, one boundary at a time."""

from __future__ import annotations

import os

import pytest
import zmq

from polyvox.core.config import BatchingConfig
from polyvox.engine import messages as m
from polyvox.engine import process_main
from polyvox.engine.model_spec import ModelSpec
from polyvox.engine.options import WorkerOptions
from polyvox.engine.owner import OwnerWatch
from polyvox.engine.process_main import ClientLink, EngineCoreProc
from polyvox.engine.request import EngineRequest


@pytest.fixture
def engine_loop():
    # a small KV pool: the default on a CPU (cpu_kv_cache_bytes, 2 GiB) is seconds of zeroing per engine
    options = WorkerOptions(config=BatchingConfig(num_kv_blocks=256), torch_threads=1)
    worker = options.worker(
        options.prompt_builder(ModelSpec(random_weights="tiny", device="cpu").source().load())
    )
    context = zmq.Context()
    socket = context.socket(zmq.ROUTER)
    link = ClientLink(socket, OwnerWatch(os.getppid()))  # owned by this process's parent
    socket.bind("inproc://engine")
    client = context.socket(zmq.DEALER)
    client.connect("inproc://engine")
    loop = EngineCoreProc(worker, link)
    yield loop, client
    loop.prepare_pool.shutdown()
    client.close(linger=0)
    link.close()
    socket.close(linger=0)
    context.term()


def _send(client: zmq.Socket, key: int, socket: zmq.Socket) -> None:
    client.send(m.encode(m.Generate(key, EngineRequest(text="Words that came during a step.", seed=7))))
    assert socket.poll(10_000)  # it has reached the engine's socket: the boundary reads it


def test_a_request_read_at_a_step_boundary_joins_that_step(engine_loop, monkeypatch):
    loop, client = engine_loop
    # as if steps were long: the wait for a prompt read at the boundary ends only when it is ready
    monkeypatch.setattr(process_main, "ADMIT_WAIT_CAP_S", 600.0)
    _send(client, 1, loop.link.socket)
    while not loop.core.has_work():  # the idle engine admits the first request once it is prepared
        loop.take(wait=True)
    loop.core.step()
    loop.step_s = 6000.0  # the boundary after a step (see above)
    _send(client, 2, loop.link.socket)
    loop.take(wait=False)
    assert sorted(key for _, key in loop.seq_of) == [1, 2]  # both in the next step
    assert sorted(out.seq_id for out in loop.core.step()) == sorted(loop.seq_of.values())

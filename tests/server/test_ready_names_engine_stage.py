"""While an engine process starts, `/ready` names the stage that process says it is in (its rank's
`EngineRank.stage`, as each client keeps it), not a copy of it kept in the server's own start-up
stages. A real server on loopback around a fake engine whose rank reports a stage."""

from __future__ import annotations

import threading

import httpx

from polyvox.backends.fake import FakeBackend
from polyvox.engine.stats import EngineRank

STAGE = "load weights from /models/voxcpm2 to cuda:0"


class StartingInProcesses(FakeBackend):
    """Not ready; its one rank, an engine process, says which stage of its start it is in."""

    def engine_ranks(self) -> list[EngineRank]:
        return [EngineRank(up=False, stats=None, stage=STAGE if not self.ready else None)]


def test_ready_names_the_stage_an_engine_process_is_in(serve) -> None:
    gate = threading.Event()
    url = serve(StartingInProcesses(ready_gate=gate), wait_ready=False)
    try:
        starting = httpx.get(f"{url}/ready")
        assert starting.status_code == 503
        error = starting.json()["error"]
        assert error["code"] == "engine_not_ready"
        assert error["message"] == f"the engine is still starting: {STAGE}"
    finally:
        gate.set()

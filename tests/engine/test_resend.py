"""What `DataParallelEngine` does with the requests of a rank that goes away, and what the one rerun
policy (`backends/rerun.py`) does with them above it, on ranks that die when a test says so (the real
engine processes are killed in test_data_parallel_serving.py, test_one_rank_restart.py and
test_api_server_count.py). The engine ends a request none of whose audio had come back with `EngineDied`
and counts it as rerouted, one that had audio with `LostMidAudio`, and sends nothing again itself;
through the VoxCPM back end and `rerun.sent`, a piece lost before any audio is sent again to a live rank
with its seed; with no rank up, it waits for the first that comes back, or for the engine to stop; and
an input that kills every rank it reaches is sent at most PIECE_SENDS times."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import SimpleNamespace

import numpy as np
import pytest

from polyvox.backends.base import SynthesisRequest
from polyvox.backends.errors import AudioLost, PieceLost
from polyvox.backends.rerun import PIECE_SENDS, sent
from polyvox.backends.voxcpm import VoxCPMBackend
from polyvox.core.errors import EngineError
from polyvox.engine.data_parallel import DataParallelEngine
from polyvox.engine.link import EngineDied, LostMidAudio, SendFailed
from polyvox.engine.model_spec import ModelSpec
from polyvox.engine.options import WorkerOptions
from polyvox.engine.request import EngineRequest
from polyvox.runtime.ready_signal import ReadySignal

PATCH = np.ones(4, dtype=np.float32)


class Rank:
    """A rank's client as the engine sees it: up or not, its load, and what it was sent. It serves
    `patches` patches per request, or, with `hold`, holds its requests (after `before_death` patches
    each) until `die()` ends them with EngineDied."""

    def __init__(self, up: bool = True, load: int = 0, hold: bool = False, before_death: int = 0) -> None:
        self.up, self.load, self.hold, self.before_death = up, load, hold, before_death
        self.patches = 3
        self.stats, self.restarts = None, 0
        self.stage: str | None = None  # serving (no start-up stage to name)
        self.sent: list[EngineRequest] = []
        self.ready_signal = ReadySignal()  # the engine's, announced as a real client's is (`engine()`)
        self._death = asyncio.Event()

    def come_up(self) -> None:
        self.up, self.hold = True, False
        self.ready_signal.announce()

    async def stop(self) -> None:
        self.die()

    def die(self) -> None:
        self.up = False
        self.ready_signal.announce()
        self._death.set()

    async def generate(self, request: EngineRequest) -> AsyncGenerator[np.ndarray, None]:
        if not self.up:
            raise SendFailed("not running")
        self.sent.append(request)
        if not self.hold:
            for _ in range(self.patches):
                yield PATCH
            return
        for _ in range(self.before_death):
            yield PATCH
        await self._death.wait()
        raise EngineDied("engine rank died")


def engine(*ranks: Rank) -> DataParallelEngine:
    dp = DataParallelEngine([ModelSpec()] * len(ranks), WorkerOptions())
    dp.clients = list(ranks)  # type: ignore[arg-type]
    for rank in ranks:
        rank.ready_signal = dp.ready_signal
    return dp


async def take(dp: DataParallelEngine, request: EngineRequest, into: list[np.ndarray]) -> None:
    async for patch in dp.generate(request):
        into.append(patch)


def on_ranks(dp: DataParallelEngine) -> SimpleNamespace:
    """The VoxCPM back end's own `generate` over `dp` (what the server's text step speaks to)."""
    info = SimpleNamespace(capabilities=SimpleNamespace(voice_design=True))
    backend = SimpleNamespace(engine=dp, info=info)
    backend.generate = lambda request: VoxCPMBackend.generate(backend, request)  # type: ignore[arg-type]
    return backend


async def speak(dp: DataParallelEngine, request: SynthesisRequest, into: list[np.ndarray]) -> None:
    async for patch in sent(on_ranks(dp), request):  # type: ignore[arg-type]
        into.append(patch)


async def settle(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("never happened")


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_a_request_with_no_audio_yet_ends_with_its_rank_counted_as_rerouted():
    async def scenario() -> None:
        dying, live = Rank(hold=True), Rank(load=5)  # the least loaded one takes it first
        dp = engine(dying, live)
        held = asyncio.create_task(take(dp, EngineRequest("held", request_id="a"), []))
        await settle(lambda: len(dying.sent) == 1)
        dying.die()
        with pytest.raises(EngineDied) as lost:
            await held
        assert not isinstance(lost.value, LostMidAudio)
        assert live.sent == []  # the engine sends nothing again itself
        assert dp.ranks()[0].rerouted == {"rank_died": 1, "send_failed": 0}

    run(scenario)


def test_a_request_that_had_audio_ends_with_its_rank():
    async def scenario() -> None:
        dying, live = Rank(hold=True, before_death=1), Rank(load=5)
        dp = engine(dying, live)
        audio: list[np.ndarray] = []
        streaming = asyncio.create_task(take(dp, EngineRequest("cut", request_id="a"), audio))
        await settle(lambda: len(audio) == 1)
        dying.die()
        with pytest.raises(LostMidAudio):
            await streaming
        assert live.sent == [] and dp.ranks()[0].rerouted["rank_died"] == 0

    run(scenario)


def test_a_piece_with_no_audio_yet_moves_to_a_live_rank_with_its_seed_and_is_counted():
    async def scenario() -> None:
        dying, live = Rank(hold=True), Rank(load=5)  # the least loaded one takes it first
        dp = engine(dying, live)
        audio: list[np.ndarray] = []
        first = SynthesisRequest("first", seed=7, request_id="a")
        second = SynthesisRequest("second", seed=11, request_id="b")
        one = asyncio.create_task(speak(dp, first, audio))
        two = asyncio.create_task(speak(dp, second, []))
        await settle(lambda: len(dying.sent) == 2)
        dying.die()
        await asyncio.gather(one, two)
        assert len(audio) == live.patches  # all of it, from the live rank
        assert [r.text for r in live.sent] == ["first", "second"]
        assert [r.seed for r in live.sent] == [7, 11]  # the same requests, seeds kept
        assert dp.ranks()[0].rerouted == {"rank_died": 2, "send_failed": 0}
        assert dp.ranks()[1].rerouted == {"rank_died": 0, "send_failed": 0}

    run(scenario)


def test_a_piece_that_had_audio_is_lost_for_the_answer_to_decide():
    async def scenario() -> None:
        dying, live = Rank(hold=True, before_death=1), Rank(load=5)
        dp = engine(dying, live)
        audio: list[np.ndarray] = []
        streaming = asyncio.create_task(speak(dp, SynthesisRequest("cut", seed=1, request_id="a"), audio))
        await settle(lambda: len(audio) == 1)
        dying.die()
        with pytest.raises(AudioLost):
            await streaming
        assert live.sent == []

    run(scenario)


def test_with_no_rank_up_a_piece_waits_for_the_first_to_come_back():
    async def scenario() -> None:
        only = Rank(hold=True)
        dp = engine(only)
        audio: list[np.ndarray] = []
        waiting = asyncio.create_task(speak(dp, SynthesisRequest("queued", seed=1, request_id="a"), audio))
        await settle(lambda: len(only.sent) == 1)
        only.die()
        await settle(lambda: dp.ranks()[0].rerouted["rank_died"] == 1)
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done() and len(only.sent) == 1  # nothing is sent to a rank that is down
        only.come_up()
        await waiting
        assert len(audio) == only.patches and len(only.sent) == 2

    run(scenario)


def test_a_request_waiting_for_a_rank_fails_when_the_engine_stops():
    async def scenario() -> None:
        dp = engine(Rank(up=False))
        waiting = asyncio.create_task(take(dp, EngineRequest("never", request_id="a"), []))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done()
        await dp.stop()
        with pytest.raises(EngineError, match="stopped"):
            await waiting

    run(scenario)


def test_an_input_that_kills_every_rank_it_reaches_is_sent_at_most_piece_sends_times():
    async def scenario() -> None:
        ranks = [Rank(hold=True) for _ in range(PIECE_SENDS + 1)]
        dp = engine(*ranks)
        poison = asyncio.create_task(speak(dp, SynthesisRequest("poison", seed=1, request_id="a"), []))
        for _ in range(PIECE_SENDS):
            await settle(lambda: any(rank.up and rank.sent for rank in ranks))
            next(rank for rank in ranks if rank.up and rank.sent).die()
        with pytest.raises(PieceLost):
            await poison
        assert sum(len(rank.sent) for rank in ranks) == PIECE_SENDS

    run(scenario)

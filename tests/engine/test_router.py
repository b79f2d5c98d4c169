"""Data-parallel routing: a request goes to the rank that will serve it soonest, unless the rank that
last served its voice prompt is about as loaded (its prefix cache likely holds the prompt)."""

from __future__ import annotations

import numpy as np
import pytest

from polyvox.engine.request import EngineReference, EngineRequest
from polyvox.engine.router import NoRankUp, Router, voice_key

CLIP = EngineReference(np.zeros(16000, dtype=np.float32), 16000, content_hash="clip-a")


def cloned(text: str = "Hello.") -> EngineRequest:
    return EngineRequest(text=text, reference=CLIP)


def test_with_loads_equal_a_voice_goes_back_to_the_rank_that_served_it():
    router = Router(2)
    voice = voice_key(cloned())
    first = router.choose([0, 0], voice)
    assert [router.choose([3, 3], voice) for _ in range(5)] == [first] * 5
    # a rank one request busier is still "as loaded": the prompt's blocks are worth it
    assert router.choose([1, 0] if first == 0 else [0, 1], voice) == first
    assert router.by_affinity[first] == 6


def test_under_skewed_load_the_less_loaded_rank_is_chosen_over_the_voices_rank():
    router = Router(2)
    voice = voice_key(cloned())
    assert router.choose([0, 5], voice) == 0
    assert router.choose([3, 1], voice) == 1  # rank 0 holds the voice but has two more requests
    assert router.by_load == [1, 1] and router.by_affinity == [0, 0]


def test_the_margin_a_voices_rank_gets_is_a_quarter_of_the_least_load():
    router = Router(2)
    voice = voice_key(cloned())
    assert router.choose([0, 5], voice) == 0
    assert router.choose([25, 20], voice) == 0  # within 20 + 5
    assert router.choose([26, 20], voice) == 1  # past it


def test_requests_without_a_shared_voice_take_turns_over_equally_loaded_ranks():
    router = Router(3)
    assert {router.choose([2, 2, 2], None) for _ in range(3)} == {0, 1, 2}
    assert router.choose([2, 1, 2], None) == 1


def test_ranks_that_are_down_are_never_chosen():
    router = Router(2)
    voice = voice_key(cloned())
    assert router.choose([None, 7], voice) == 1
    assert router.choose([0, None], voice) == 0  # its voice's rank is down: the other serves it
    with pytest.raises(NoRankUp):
        router.choose([None, None], voice)


def test_a_voice_is_its_reference_clip_or_its_design_text():
    assert voice_key(cloned("One.")) == voice_key(cloned("Two.")) == "clip:clip-a"
    assert voice_key(EngineRequest(text="Hi.", instructions=" a calm voice ")) == "design:a calm voice"
    assert voice_key(EngineRequest(text="Hi.")) is None


def test_a_long_inputs_later_pieces_follow_its_first_while_that_rank_is_up():
    """A long input's pieces (one `request_id`, `piece` 0, 1, ...) go where piece 0 went,
    however the loads move; another request is routed by load; a piece whose rank is down is routed
    afresh and the rest follow it there. Routing counts the request once."""
    router = Router(2)

    def piece(request: str, index: int) -> EngineRequest:
        return EngineRequest(text=f"Piece {index}.", request_id=request, piece=index)

    first = router.route([0, 0], piece("a", 0))
    other = 1 - first
    skewed = [0, 0]
    skewed[first] = 9  # its rank much busier: a new request would go to the other one
    assert [router.route(skewed, piece("a", i)) for i in range(1, 4)] == [first] * 3
    assert router.route(skewed, piece("b", 0)) == other
    assert sum(router.by_affinity) + sum(router.by_load) == 2
    down: list[int | None] = [0, 0]
    down[first] = None
    assert router.route(down, piece("a", 4)) == other
    assert router.route([0, 0], piece("a", 5)) == other

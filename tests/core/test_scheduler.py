"""Scheduler and block manager: budgets, prefix caching, preemption, cancellation, block accounting."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest
import torch

from polyvox.core.block_manager import BlockManager
from polyvox.core.config import BatchingConfig
from polyvox.core.scheduler import Scheduler
from polyvox.core.sequence import SamplingParams, Sequence, SequenceStatus

P, D = 4, 8


@dataclass
class Prompt:
    tokens: torch.Tensor
    text_mask: torch.Tensor
    audio_mask: torch.Tensor
    feats: torch.Tensor
    context_patches: torch.Tensor = field(default_factory=lambda: torch.zeros(0, P, D))


def prompt(n_text: int, ref: torch.Tensor | None = None, offset: int = 0) -> Prompt:
    tokens = torch.arange(10 + offset, 10 + offset + n_text)
    feats = torch.zeros(n_text, P, D)
    text_mask, audio_mask = torch.ones(n_text), torch.zeros(n_text)
    if ref is not None:
        tokens = torch.cat([torch.zeros(len(ref), dtype=torch.long), tokens])
        feats = torch.cat([ref, feats])
        text_mask = torch.cat([torch.zeros(len(ref)), text_mask])
        audio_mask = torch.cat([torch.ones(len(ref)), audio_mask])
    return Prompt(tokens, text_mask, audio_mask, feats)


def seq(n_text: int = 10, max_len: int = 8, block_size: int = 4, **kw) -> Sequence:
    return Sequence(prompt(n_text, **kw), SamplingParams(max_len=max_len, seed=0), block_size)


def make(num_blocks=64, block_size=4, max_num_seqs=8, max_tokens=64, caching=True, policy="mixed"):
    cfg = BatchingConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_tokens,
        kv_block_size=block_size,
        prefill_policy=policy,
    )
    bm = BlockManager(num_blocks, block_size, caching)
    return Scheduler(cfg, bm), bm


def run_step(sched: Scheduler, stop_after: int | None = None):
    """Pretend the model ran: mark positions computed, emit a patch for each ready sequence."""
    chunks = sched.schedule()
    for c in chunks:
        c.seq.num_computed = c.end
        sched.block_manager.commit(c.seq)
    for c in chunks:
        if c.completes:
            c.seq.patches.append(torch.full((P, D), float(len(c.seq.patches))))
            if len(c.seq.patches) >= (stop_after or c.seq.params.max_len):
                sched.finish(c.seq, "length")
    return chunks


def test_prefill_is_chunked_by_token_budget_and_decodes_one_position_per_step():
    sched, bm = make(max_tokens=8)
    s = seq(n_text=20)
    sched.add(s)
    spans = [[(c.start, c.end) for c in run_step(sched)] for _ in range(5)]
    assert spans == [[(0, 8)], [(8, 16)], [(16, 20)], [(20, 21)], [(21, 22)]]
    assert len(s.patches) == 3


def test_mixed_policy_prefills_a_newcomer_in_the_same_step_as_the_running_decodes():
    sched, _ = make(max_tokens=8)
    first, second = seq(n_text=6), seq(n_text=6, offset=100)
    sched.add(first)
    run_step(sched)
    sched.add(second)
    step = [(c.seq, c.start, c.end) for c in run_step(sched)]
    assert step == [(first, 6, 7), (second, 0, 6)]


def test_separate_policy_gives_prompt_chunks_steps_of_their_own():
    sched, _ = make(max_tokens=8, policy="separate")
    first, second = seq(n_text=6), seq(n_text=12, offset=100)
    sched.add(first)
    run_step(sched)  # its prompt, alone
    run_step(sched)  # its first decode
    sched.add(second)
    steps = [[(c.seq, c.start, c.end) for c in run_step(sched)] for _ in range(4)]
    # a prompt chunk runs alone while the running request waits, but never two such steps in a row
    assert steps == [
        [(second, 0, 8)],
        [(first, 7, 8), (second, 8, 12)],
        [(first, 8, 9), (second, 12, 13)],
        [(first, 9, 10), (second, 13, 14)],
    ]
    while sched.has_work():
        run_step(sched)
    assert len(first.patches) == len(second.patches) == 8


def test_separate_policy_keeps_decoding_while_requests_keep_arriving():
    sched, _ = make(max_num_seqs=64, policy="separate")
    first = seq(n_text=6)
    sched.add(first)
    run_step(sched)
    for i in range(6):  # a newcomer before every step
        sched.add(seq(n_text=6, offset=100 * (i + 1)))
        run_step(sched)
    assert len(first.patches) >= 4  # it advanced at least every other step


def test_adaptive_policy_prefills_alone_only_while_every_stream_is_ahead_of_real_time():
    sched, _ = make(max_tokens=8, policy="adaptive")
    sched.step_estimate_s = 0.05  # a prompt-only step needs 3 x 0.05 s of audio in hand
    first, second, third = seq(n_text=6, max_len=40), seq(n_text=6, offset=100), seq(n_text=6, offset=200)
    sched.add(first)
    run_step(sched)  # nothing was running: its prompt (and first patch)
    first.first_output_at = time.perf_counter()
    run_step(sched)
    # 0.32 s of audio made in a moment: far ahead of playback, so the newcomer's prompt runs alone
    sched.add(second)
    assert [(c.seq, c.start) for c in run_step(sched)] == [(second, 0)]
    assert {c.seq for c in run_step(sched)} == {first, second}  # and then everyone, as "separate"
    second.first_output_at = time.perf_counter()
    # the first stream has fallen behind playback (it started 30 s ago): no one waits for a prompt
    first.first_output_at = time.perf_counter() - 30
    sched.add(third)
    assert {c.seq for c in run_step(sched)} == {first, second, third}


def test_adaptive_policy_under_arrivals_still_advances_every_stream():
    sched, _ = make(max_num_seqs=64, policy="adaptive")
    sched.step_estimate_s = 0.0  # every stream counts as ahead: prompt-only steps whenever possible
    first = seq(n_text=6, max_len=40)
    sched.add(first)
    run_step(sched)
    first.first_output_at = time.perf_counter()
    for i in range(6):  # a newcomer before every step
        sched.add(seq(n_text=6, offset=100 * (i + 1)))
        run_step(sched)
    assert len(first.patches) >= 4  # never two prompt-only steps in a row


def test_an_unknown_prefill_policy_is_refused():
    with pytest.raises(ValueError, match="prefill_policy"):
        BatchingConfig(prefill_policy="sometimes")


def test_max_num_seqs_caps_the_running_set_and_waiting_are_admitted_in_order():
    sched, _ = make(max_num_seqs=2)
    seqs = [seq() for _ in range(4)]
    for s in seqs:
        sched.add(s)
    run_step(sched)
    assert sched.running == seqs[:2]
    assert list(sched.waiting) == seqs[2:]
    while sched.has_work():
        run_step(sched)
    assert all(len(s.patches) == 8 for s in seqs)


def test_all_blocks_return_to_the_pool_after_requests_finish_or_are_cancelled():
    sched, bm = make()
    seqs = [seq(n_text=5 + i) for i in range(6)]
    for s in seqs:
        sched.add(s)
    run_step(sched)
    run_step(sched)
    sched.finish(seqs[0], "cancelled")
    assert seqs[0].block_table == [] and seqs[0].status is SequenceStatus.FINISHED
    sched.finish(seqs[5], "cancelled")
    while sched.has_work():
        run_step(sched)
    assert bm.num_free == bm.num_blocks


def test_cancelling_a_request_frees_its_blocks_at_once():
    sched, bm = make()
    s = seq(n_text=17)
    sched.add(s)
    run_step(sched)
    used = bm.num_used
    assert used == 5
    sched.finish(s, "cancelled")
    assert bm.num_used == 0


def test_shared_voice_prompt_reuses_cached_blocks():
    sched, bm = make()
    ref = torch.randn(12, P, D)
    a = seq(n_text=6, ref=ref)
    sched.add(a)
    run_step(sched)
    b = seq(n_text=6, ref=ref, offset=50)
    sched.add(b)
    chunks = run_step(sched)
    (cb,) = [c for c in chunks if c.seq is b]
    assert cb.start == 12  # the three reference-audio blocks came from the cache
    assert b.block_table[:3] == a.block_table[:3]
    assert bm.prefix_hits == 3


def test_different_reference_audio_with_the_same_tokens_is_not_a_cache_hit():
    sched, bm = make()
    a = seq(n_text=6, ref=torch.randn(12, P, D))
    sched.add(a)
    run_step(sched)
    b = seq(n_text=6, ref=torch.randn(12, P, D))
    sched.add(b)
    chunks = run_step(sched)
    assert [c.start for c in chunks if c.seq is b] == [0]
    assert bm.prefix_hits == 0


def test_freed_prefix_blocks_stay_cached_until_reused():
    sched, bm = make()
    ref = torch.randn(8, P, D)
    a = seq(n_text=3, ref=ref, max_len=2)
    sched.add(a)
    while sched.has_work():
        run_step(sched)
    assert bm.num_free == bm.num_blocks
    b = seq(n_text=3, ref=ref, max_len=2, offset=9)
    sched.add(b)
    chunks = run_step(sched)
    assert chunks[0].start == 8


def test_a_fully_cached_prompt_still_computes_its_last_position():
    sched, bm = make()
    a = seq(n_text=8)
    sched.add(a)
    run_step(sched)
    b = seq(n_text=8)
    sched.add(b)
    chunks = run_step(sched)
    assert [(c.start, c.end) for c in chunks if c.seq is b] == [(4, 8)]


def test_kv_pressure_preempts_the_newest_and_it_resumes_with_its_patches():
    sched, bm = make(num_blocks=8, max_tokens=64)
    old, new = seq(n_text=9, max_len=9), seq(n_text=9, max_len=9, offset=40)
    sched.add(old)
    sched.add(new)
    while sched.has_work():
        run_step(sched)
        assert bm.num_used == sum(len(s.block_table) for s in sched.running)
    assert sched.num_preemptions >= 1
    assert new.num_preemptions >= 1 and old.num_preemptions == 0
    # the resumed sequence kept its generated patches and went on from there
    assert [float(p[0, 0]) for p in new.patches] == [float(i) for i in range(9)]
    assert bm.num_free == bm.num_blocks


def test_a_request_that_can_never_fit_the_pool_is_refused():
    sched, _ = make(num_blocks=4)
    with pytest.raises(ValueError):
        sched.add(seq(n_text=10, max_len=20))


def test_waiting_head_is_not_overtaken_by_smaller_requests():
    sched, bm = make(num_blocks=10, max_num_seqs=8)
    big = seq(n_text=20, max_len=10)
    sched.add(big)
    run_step(sched)
    blocker = seq(n_text=24, max_len=2, offset=100)  # needs 6 blocks, 5 are free
    small = seq(n_text=2, max_len=2, offset=200)  # would fit now
    sched.add(blocker)
    sched.add(small)
    run_step(sched)
    assert blocker.status is SequenceStatus.WAITING and small.status is SequenceStatus.WAITING
    while sched.has_work():
        run_step(sched)
    assert len(big.patches) == 10 and len(blocker.patches) == 2 and len(small.patches) == 2

"""A request's CFM noise is its own seeded generator's stream, one patch after another, however many
patches the engine draws at once and whoever shares its batch (what makes a seeded request's audio the
same in any batch)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polyvox.core.noise import NOISE_BLOCK, NoiseBank
from polyvox.core.sequence import SamplingParams, Sequence
from polyvox.models.prompt import Prompt


def prompt(feat_dim: int, patch_size: int) -> Prompt:
    tokens = torch.tensor([5, 6, 7])
    mask = torch.ones(3, dtype=torch.long)
    feats = torch.zeros(3, patch_size, feat_dim)
    return Prompt(tokens, mask, 1 - mask, feats, torch.zeros(0, patch_size, feat_dim), 3)


# the tiny and full VoxCPM2 latent shapes, and one whose size is no multiple of the sampler's block
@pytest.mark.parametrize(("feat_dim", "patch_size"), [(16, 4), (64, 4), (5, 3)])
def test_noise_is_the_seeded_stream_drawn_one_patch_at_a_time(feat_dim, patch_size):
    seq = Sequence(prompt(feat_dim, patch_size), SamplingParams(seed=7), block_size=16)
    bank = NoiseBank(feat_dim, patch_size)
    slots = np.array([bank.acquire()])
    generator = torch.Generator().manual_seed(7)
    for _ in range(2 * NOISE_BLOCK + 3):
        expected = torch.randn((1, feat_dim, patch_size), generator=generator)
        assert torch.equal(bank.take([seq], slots), expected)
        seq.patches.append(torch.zeros(patch_size, feat_dim))


def test_each_request_gets_its_own_stream_in_a_batch_that_changes_and_outgrows_the_bank():
    feat_dim, patch_size = 16, 4
    bank = NoiseBank(feat_dim, patch_size, capacity=2)
    seqs = [Sequence(prompt(feat_dim, patch_size), SamplingParams(seed=s), block_size=16) for s in range(5)]
    streams = {s.seq_id: torch.Generator().manual_seed(s.seed) for s in seqs}
    slots = {s.seq_id: bank.acquire() for s in seqs}
    # rows join and leave, in changing order, and the first draws of requests end at different steps
    batches = [seqs[:2], seqs[:5], seqs[4:0:-1], seqs[2:4]] * NOISE_BLOCK
    for batch in batches:
        noise = bank.take(batch, np.array([slots[s.seq_id] for s in batch]))
        expected = [torch.randn((1, feat_dim, patch_size), generator=streams[s.seq_id]) for s in batch]
        assert torch.equal(noise, torch.cat(expected))
        for s in batch:
            s.patches.append(torch.zeros(patch_size, feat_dim))
    bank.release(slots[seqs[0].seq_id])
    newcomer = Sequence(prompt(feat_dim, patch_size), SamplingParams(seed=9), block_size=16)
    slot = bank.acquire()
    assert slot == slots[seqs[0].seq_id]  # the freed slot, its old block forgotten
    first = bank.take([newcomer], np.array([slot]))
    assert torch.equal(
        first, torch.randn((1, feat_dim, patch_size), generator=torch.Generator().manual_seed(9))
    )

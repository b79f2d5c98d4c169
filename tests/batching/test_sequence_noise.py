"""A request's CFM noise is its own seeded generator's stream, one patch after another, however many
patches the engine draws at once (what makes a seeded request's audio the same in any batch)."""

from __future__ import annotations

import pytest
import torch

from polyvox.batching.sequence import NOISE_BLOCK, SamplingParams, Sequence
from polyvox.models.voxcpm2.prompt import Prompt


def prompt(feat_dim: int, patch_size: int) -> Prompt:
    tokens = torch.tensor([5, 6, 7])
    mask = torch.ones(3, dtype=torch.long)
    feats = torch.zeros(3, patch_size, feat_dim)
    return Prompt(tokens, mask, 1 - mask, feats, torch.zeros(0, patch_size, feat_dim), 3)


# the tiny and full VoxCPM2 latent shapes, and one whose size is no multiple of the sampler's block
@pytest.mark.parametrize(("feat_dim", "patch_size"), [(16, 4), (64, 4), (5, 3)])
def test_noise_is_the_seeded_stream_drawn_one_patch_at_a_time(feat_dim, patch_size):
    seq = Sequence(prompt(feat_dim, patch_size), SamplingParams(seed=7), block_size=16)
    generator = torch.Generator().manual_seed(7)
    for _ in range(2 * NOISE_BLOCK + 3):
        expected = torch.randn((1, feat_dim, patch_size), generator=generator)
        assert torch.equal(seq.next_noise(feat_dim, patch_size), expected)

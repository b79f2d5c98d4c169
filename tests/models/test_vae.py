"""AudioVAE V2: numerical parity with the official implementation, rates, and streaming decode."""

from __future__ import annotations

import importlib.machinery
import math
import sys
import types

import pytest
import torch

from polyvox.models.layers.audio_vae import AudioVAE, StreamState, fold_weight_norm
from polyvox.models.layers.audio_vae_config import AudioVAEConfig

CFG = AudioVAEConfig.tiny()
HOP_OUT = math.prod(CFG.decoder_rates)


def _official_vae_classes():
    if "torchaudio" not in sys.modules:
        stub = types.ModuleType("torchaudio")
        stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
        sys.modules["torchaudio"] = stub
    from voxcpm.modules.audiovae import AudioVAEConfigV2, AudioVAEV2

    return AudioVAEV2, AudioVAEConfigV2


@pytest.fixture(scope="module")
def official():
    """The official AudioVAEV2 with random weights (weight-norm g and v perturbed, random sr-conditioning)."""
    vae_cls, cfg_cls = _official_vae_classes()
    torch.manual_seed(0)
    vae = vae_cls(cfg_cls(**CFG.to_dict())).eval()
    with torch.no_grad():
        for name, p in vae.named_parameters():
            if "embed" in name:
                p.normal_(1.0, 0.3)
            else:
                p.add_(torch.randn_like(p) * 0.1)
    return vae


@pytest.fixture(scope="module")
def ours(official):
    vae = AudioVAE(CFG).eval()
    vae.load_official_state_dict(official.state_dict())
    return vae


def _speechlike(seconds: float, rate: int = 16000, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(int(seconds * rate)) / rate
    tone = 0.3 * torch.sin(2 * math.pi * 180 * t) * (1 + torch.sin(2 * math.pi * 3 * t))
    return (tone + 0.05 * torch.randn(t.shape, generator=g)).unsqueeze(0)


def test_official_checkpoint_is_weight_normed_and_loads_without_parametrization(official, ours):
    official_keys = official.state_dict().keys()
    assert any(k.endswith(".weight_g") for k in official_keys)
    assert not any("weight_g" in k or "weight_v" in k or "parametriz" in k for k in ours.state_dict())


def test_encoding_matches_official(official, ours):
    wav = torch.cat([_speechlike(0.83, seed=1), _speechlike(0.83, seed=2)])  # not a whole frame: padded
    with torch.no_grad():
        expected = official.encode(wav, 16000)
    got = ours.encode(wav)
    assert got.shape == expected.shape == (2, CFG.latent_dim, math.ceil(0.83 * 25))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_decoding_matches_official(official, ours):
    latents = torch.randn(2, CFG.latent_dim, 10, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = official.decode(latents)
    got = ours.decode(latents)
    assert got.shape == (2, 1, 10 * HOP_OUT)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_one_second_in_is_25_frames_and_decodes_to_one_second_at_48k(ours):
    latents = ours.encode(_speechlike(1.0))
    assert latents.shape[-1] == 25
    assert ours.decode(latents).shape[-1] == 48000


def test_streaming_decode_concatenated_equals_full_decode(ours):
    latents = torch.randn(3, CFG.latent_dim, 16, generator=torch.Generator().manual_seed(4))
    full = ours.decode(latents).squeeze(1)
    state = ours.init_stream_state(3)
    chunks = []
    for start in range(0, 16, 4):
        audio, state = ours.decode_stream(latents[..., start : start + 4], state)
        assert audio.shape == (3, 4 * HOP_OUT)
        chunks.append(audio)
    torch.testing.assert_close(torch.cat(chunks, dim=-1), full, atol=1e-4, rtol=0)


def test_streams_started_apart_can_be_batched_and_split_by_their_state(ours):
    """The engine joins requests at different points: per-request states concatenate and split."""
    gen = torch.Generator().manual_seed(5)
    a, b = (torch.randn(1, CFG.latent_dim, 12, generator=gen) for _ in range(2))
    full_a, full_b = ours.decode(a).squeeze(1), ours.decode(b).squeeze(1)

    state_a = ours.init_stream_state(1)
    out_a = []
    for start in (0, 4):
        audio, state_a = ours.decode_stream(a[..., start : start + 4], state_a)
        out_a.append(audio)
    state_b = ours.init_stream_state(1)
    audio, state_b = ours.decode_stream(b[..., 0:4], state_b)
    out_b = [audio]

    joint = StreamState.cat([state_a, state_b])
    assert joint.batch_size == 2
    audio, joint = ours.decode_stream(torch.cat([a[..., 8:12], b[..., 4:8]]), joint)
    out_a.append(audio[0:1])
    out_b.append(audio[1:2])
    audio, _ = ours.decode_stream(b[..., 8:12], joint.select(1))
    out_b.append(audio)

    torch.testing.assert_close(torch.cat(out_a, -1), full_a, atol=1e-4, rtol=0)
    torch.testing.assert_close(torch.cat(out_b, -1), full_b, atol=1e-4, rtol=0)


def test_decode_stream_leaves_the_given_state_untouched(ours):
    latents = torch.randn(1, CFG.latent_dim, 4, generator=torch.Generator().manual_seed(6))
    state = ours.init_stream_state(1)
    first, _ = ours.decode_stream(latents, state)
    again, _ = ours.decode_stream(latents, state)
    torch.testing.assert_close(first, again, atol=0, rtol=0)


def test_state_written_in_official_layout_loads_into_the_official_vae(official, ours):
    vae_cls, cfg_cls = _official_vae_classes()
    reloaded = vae_cls(cfg_cls(**CFG.to_dict())).eval()
    state = ours.official_state_dict()
    assert state.keys() == official.state_dict().keys()
    reloaded.load_state_dict(state)
    latents = torch.randn(1, CFG.latent_dim, 4, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        torch.testing.assert_close(reloaded.decode(latents), ours.decode(latents), atol=1e-4, rtol=0)


def test_new_style_weight_norm_parametrization_is_folded_too(ours):
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 6, 3))
    with torch.no_grad():
        conv.parametrizations.weight.original0.mul_(1.7)
    folded = fold_weight_norm({f"x.{k}": v for k, v in conv.state_dict().items()})
    assert set(folded) == {"x.weight", "x.bias"}
    torch.testing.assert_close(folded["x.weight"], conv.weight.detach())

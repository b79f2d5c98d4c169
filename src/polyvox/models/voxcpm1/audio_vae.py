"""AudioVAE V1 (VoxCPM-0.5B, VoxCPM 1.5): VoxCPM2's AudioVAE without output-rate conditioning, decoding
at the rate it encodes, with V1's encoder alignment.

V1's strided encoder convolutions pad `2 * ceil(stride / 2)` samples on the left, one more than V2's
`stride` for an odd stride (VoxCPM 1.5's 3 and 7s, VoxCPM-0.5B's 5); the decoder is V2's.
"""

from __future__ import annotations

import math

from polyvox.models.layers.audio_vae import AudioVAE, CausalConv1d, CausalEncoderBlock
from polyvox.models.layers.audio_vae_config import AudioVAEConfig


def audio_vae_v1(config: AudioVAEConfig) -> AudioVAE:
    """VoxCPM2's AudioVAE built of `config` (no rate conditioning) with V1's encoder padding."""
    if config.sr_bin_boundaries is not None or config.out_sample_rate != config.sample_rate:
        raise ValueError("AudioVAE V1 decodes at its input rate, without rate conditioning")
    vae = AudioVAE(config)
    blocks = [m for m in vae.encoder.block if isinstance(m, CausalEncoderBlock)]
    for block, stride in zip(blocks, config.encoder_rates, strict=True):
        downsample = block.block[-1]
        assert isinstance(downsample, CausalConv1d)
        downsample.left_pad = 2 * math.ceil(stride / 2)
    return vae

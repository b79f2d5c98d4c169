"""The official `voxcpm` 2.0.3 implementation, imported for parity tests.

`torchaudio` has no wheel for the torch in use; the official package only needs its import to
succeed, so an empty module stands in when the real one is missing.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from pathlib import Path

import torch

from polyvox.models.voxcpm2.config import VoxCPM2Config


def import_voxcpm() -> types.ModuleType:
    """`voxcpm.model.voxcpm2`, importable without torchaudio."""
    if "torchaudio" not in sys.modules:
        try:
            import torchaudio  # noqa: F401
        except Exception:
            stub = types.ModuleType("torchaudio")
            stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
            sys.modules["torchaudio"] = stub
    import voxcpm.model.voxcpm2 as official

    return official


def official_tokenizer(tokenizer_dir: str | Path):
    """The official path's tokenizer: LlamaTokenizerFast, as `VoxCPM2Model.from_local` loads it."""
    import_voxcpm()
    from transformers import LlamaTokenizerFast

    return LlamaTokenizerFast.from_pretrained(str(tokenizer_dir))


def official_vae(config: VoxCPM2Config):
    import_voxcpm()
    from voxcpm.modules.audiovae import AudioVAEConfigV2, AudioVAEV2

    return AudioVAEV2(AudioVAEConfigV2(**(config.audio_vae_config or {})))


def build_official_model(config: VoxCPM2Config, tokenizer_dir: str | Path, seed: int = 0, std: float = 0.02):
    """`VoxCPM2Model(config, tokenizer, vae)` on CPU in fp32, every matrix of the LM side ~ N(0, std)."""
    official = import_voxcpm()
    torch.manual_seed(seed)
    cfg = official.VoxCPMConfig.model_validate({**config.model_dump(), "device": "cpu", "dtype": "float32"})
    model = official.VoxCPM2Model(cfg, official_tokenizer(tokenizer_dir), official_vae(config), device="cpu")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith("audio_vae") and p.dim() >= 2:
                p.normal_(0.0, std)
    return model.float().eval()


def lm_state_dict(model) -> dict[str, torch.Tensor]:
    """The official model's state_dict without the AudioVAE."""
    return {k: v for k, v in model.state_dict().items() if not k.startswith("audio_vae.")}

"""VoxCPM2Config reads the official config.json; the full-size model has the official parameters."""

from __future__ import annotations

import json

import pydantic
import pytest
import torch

from helpers.official import import_voxcpm, official_tokenizer, official_vae
from polyvox.models.voxcpm2.config import VoxCPM2Config
from polyvox.models.voxcpm2.model import VoxCPM2LM


def official_config_dict(config: VoxCPM2Config) -> dict:
    """The config as the official package validates and dumps it (what its config.json holds)."""
    official = import_voxcpm()
    return official.VoxCPMConfig.model_validate(config.model_dump()).model_dump()


def test_reads_official_config_json(tmp_path):
    data = official_config_dict(VoxCPM2Config.full())
    (tmp_path / "config.json").write_text(json.dumps(data))
    config = VoxCPM2Config.from_json(tmp_path)
    assert config == VoxCPM2Config.full()
    assert config.lm_config.head_dim == 128
    assert config.torch_dtype == torch.bfloat16
    assert config.residual_lm_config.num_hidden_layers == 8 and config.residual_lm_config.no_rope


def test_rejects_other_architectures():
    data = VoxCPM2Config.tiny().model_dump()
    with pytest.raises(pydantic.ValidationError):
        VoxCPM2Config.model_validate({**data, "architecture": "voxcpm1.5"})
    assert (
        VoxCPM2Config.model_validate({k: v for k, v in data.items() if k != "architecture"})
        == VoxCPM2Config.tiny()
    )


@pytest.mark.parametrize("size", ["tiny", "full"])
def test_parameters_match_official(size, tokenizer_dir):
    """Same state_dict keys, shapes and order as the official VoxCPM2Model minus the VAE (on meta)."""
    official = import_voxcpm()
    config = getattr(VoxCPM2Config, size)()
    official_cfg = official.VoxCPMConfig.model_validate({**config.model_dump(), "device": "cpu"})
    with torch.device("meta"):
        reference = official.VoxCPM2Model(
            official_cfg, official_tokenizer(tokenizer_dir), official_vae(config), device="cpu"
        )
        ours = VoxCPM2LM(config)
    expected = [(k, v.shape) for k, v in reference.state_dict().items() if not k.startswith("audio_vae.")]
    # in the official order too (q/k/v and gate/up are fused inside, split again in state dicts)
    assert [(k, v.shape) for k, v in ours.state_dict().items()] == expected

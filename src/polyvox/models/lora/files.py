"""The official on-disk LoRA adapter: a directory holding `lora_weights.safetensors` (or
`lora_weights.ckpt`, a torch pickle of `{"state_dict": ...}`) with `<linear name>.lora_A` `[r, in]` and
`<linear name>.lora_B` `[out, r]` per adapted layer, and `lora_config.json`
(`{"base_model": ..., "lora_config": {...}}`, the fields of the official `LoRAConfig`). PyTorch is
imported to read the weights, not with this module: the API side names `AdapterError` without it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

WEIGHTS_SAFETENSORS = "lora_weights.safetensors"
WEIGHTS_CKPT = "lora_weights.ckpt"
CONFIG_FILE = "lora_config.json"

if TYPE_CHECKING:
    import torch


class AdapterError(ValueError):
    """An adapter that cannot be served; the message names the adapter and the problem."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"LoRA adapter {name!r}: {problem}")
        self.name = name
        self.problem = problem


class AdapterConfig(BaseModel):
    """The official `LoRAConfig` (dropout is a training setting, unused here). `target_proj_modules`
    None means the architecture's own default list."""

    model_config = ConfigDict(extra="ignore")

    enable_lm: bool = False
    enable_dit: bool = False
    enable_proj: bool = False
    r: int = Field(8, ge=1)
    alpha: float = 16
    target_modules_lm: list[str] = ["q_proj", "v_proj", "k_proj", "o_proj"]
    target_modules_dit: list[str] = ["q_proj", "v_proj", "k_proj", "o_proj"]
    target_proj_modules: list[str] | None = None

    @property
    def scaling(self) -> float:
        return self.alpha / self.r


# What the official `VoxCPM(lora_weights_path=...)` assumes for weights saved without a config file.
OFFICIAL_DEFAULT = AdapterConfig(enable_lm=True, enable_dit=True, enable_proj=False)


@dataclass(frozen=True)
class AdapterFiles:
    """An adapter as read from disk, not yet matched to a model. `digest` identifies its content."""

    name: str
    path: Path
    config: AdapterConfig
    base_model: str | None
    tensors: dict[str, torch.Tensor]
    digest: bytes


def read_adapter(name: str, directory: str | Path) -> AdapterFiles:
    """Read adapter `name` from `directory`; AdapterError when it is missing or unreadable."""
    path = Path(directory)
    if not path.is_dir():
        raise AdapterError(name, f"{path} is not a directory")
    config, base_model = _read_config(name, path)
    tensors = _read_weights(name, path)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(config.model_dump_json().encode())
    for key in sorted(tensors):
        digest.update(key.encode())
        digest.update(tensors[key].float().contiguous().numpy().tobytes())
    return AdapterFiles(name, path, config, base_model, tensors, digest.digest())


def _read_config(name: str, path: Path) -> tuple[AdapterConfig, str | None]:
    file = path / CONFIG_FILE
    if not file.exists():
        return OFFICIAL_DEFAULT, None
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
        body = raw.get("lora_config", raw) if isinstance(raw, dict) else None
        if not isinstance(body, dict):
            raise AdapterError(name, f"{file.name} holds no lora_config object")
        return AdapterConfig.model_validate(body), raw.get("base_model")
    except (OSError, json.JSONDecodeError) as exc:
        raise AdapterError(name, f"{file.name} cannot be read: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise AdapterError(name, f"{file.name}: {where}: {first['msg']}") from exc


def _read_weights(name: str, path: Path) -> dict[str, torch.Tensor]:
    import torch

    state: Any
    try:
        if (path / WEIGHTS_SAFETENSORS).exists():
            from safetensors.torch import load_file

            state = load_file(str(path / WEIGHTS_SAFETENSORS), device="cpu")
        elif (path / WEIGHTS_CKPT).exists():
            ckpt = torch.load(path / WEIGHTS_CKPT, map_location="cpu", weights_only=True)
            state = ckpt.get("state_dict", ckpt) if isinstance(ckpt, dict) else None
        else:
            raise AdapterError(name, f"no {WEIGHTS_SAFETENSORS} or {WEIGHTS_CKPT} in {path}")
    except AdapterError:
        raise
    except Exception as exc:  # a truncated or foreign file: its reader's own words say what is wrong
        raise AdapterError(name, f"its weights cannot be read: {exc}") from exc
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise AdapterError(name, "its weights file holds no tensor state dict")
    # names saved from a torch.compile'd model carry `_orig_mod` (the official loader strips it too)
    return {k.replace("._orig_mod.", "."): v for k, v in state.items()}

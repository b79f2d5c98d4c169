"""`ModelSource`: a model of any family the server will load, known before it loads. A checkpoint is checked
at once (its files, config and the LM's tensor names and shapes from the safetensors header) so a
broken one fails before the server listens; downloading and loading the weights then run in the
background while `/ready` answers 503. The release (`arch`: voxcpm1, voxcpm1.5 or voxcpm2) is read
from the checkpoint's config.json, or named for random weights.

A checkpoint is a directory, a Hugging Face repo id, or `modelscope:ORG/NAME`: a repo on ModelScope, found
in its cache (`MODELSCOPE_CACHE`, in any layout the `modelscope` package reads) without the network, else
downloaded by that package (the optional extra `polyvox[modelscope]`).

Random weights on the CPU are known without PyTorch (the release's config says the rates): the API
process of an engine in processes of its own makes its source without importing it. A checkpoint's
check reads its tensors' shapes against the model's, and `auto` or a CUDA device asks PyTorch."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from polyvox.models import modelscope_cache as modelscope
from polyvox.models.architectures import arch_of, config_for_arch, model_class, parse_config, vae_config
from polyvox.models.checkpoint import (
    CheckpointError,
    device_name,
    download_checkpoint,
    dtype_name,
    fetch_config,
    local_checkpoint,
    read_config,
)
from polyvox.models.speech_config import SpeechConfig
from polyvox.runtime.startup import stage

if TYPE_CHECKING:
    from polyvox.models.loaded_model import LoadedModel

MODELSCOPE_PREFIX = "modelscope:"


@dataclass(frozen=True)
class ModelSource:
    """What the model will be (where it runs and in what precision, by name: `cpu`, `cuda:1`; `float32`,
    `bfloat16`; output rate, the AudioVAE's input rate that reference clips are encoded at, the
    release) and how to load it (`load`, slow)."""

    device: str
    dtype: str
    sample_rate: int
    reference_rate: int
    load: Callable[[], LoadedModel]
    arch: str = "voxcpm2"


def modelscope_repo(path_or_repo: str | os.PathLike) -> str | None:
    """The ModelScope repo id of `modelscope:ORG/NAME`; None for anything else."""
    text = str(path_or_repo)
    return text.removeprefix(MODELSCOPE_PREFIX) if text.startswith(MODELSCOPE_PREFIX) else None


def on_hub(model: str, hub: str) -> str:
    """`model` as `checkpoint_source` reads it when bare repo ids name repos on `hub` (the `model_hub`
    setting): on modelscope, `ORG/NAME` that is no directory here is `modelscope:ORG/NAME`."""
    bare = not model.startswith((MODELSCOPE_PREFIX, ".", "/", "~")) and model.count("/") == 1
    if hub == "modelscope" and bare and not Path(model).exists():
        return MODELSCOPE_PREFIX + model
    return model


def _rates(config: SpeechConfig) -> tuple[int, int]:
    """(output rate, reference rate): the AudioVAE's output and input sample rates."""
    vae = vae_config(config)
    return vae.out_sample_rate, vae.sample_rate


def checkpoint_source(
    path_or_repo: str | os.PathLike, device: str | None = "auto", dtype: str | None = "auto"
) -> ModelSource:
    """A checkpoint directory, Hugging Face repo id or `modelscope:` repo, checked now; CheckpointError
    names what is wrong. A repo not in its local cache has only its config.json fetched now, the rest
    at `load`. The checkpoint is checked before the device, whose `auto` imports PyTorch (seconds): a
    wrong path or repo is said at once."""
    download: Callable[[], Path]
    if (repo := modelscope_repo(path_or_repo)) is not None:
        directory = modelscope.cached(repo)
        config_dir = directory if directory is not None else modelscope.fetch_config(repo).parent
        download = functools.partial(modelscope.download, repo)
    else:
        directory = local_checkpoint(path_or_repo)
        config_dir = directory if directory is not None else fetch_config(str(path_or_repo)).parent
        download = functools.partial(download_checkpoint, str(path_or_repo))
    try:
        config = parse_config(read_config(config_dir))
    except (ValidationError, ValueError) as exc:
        raise CheckpointError(f"{path_or_repo}'s config.json is not a VoxCPM config: {exc}") from exc
    model = model_class(arch_of(config))
    if directory is not None:
        model.check(directory)
    resolved_device = device_name(device)
    resolved_dtype = dtype_name(dtype, resolved_device)

    def load() -> LoadedModel:
        where = directory or download()
        return model.load(where, device=resolved_device, dtype=resolved_dtype)

    return ModelSource(resolved_device, resolved_dtype, *_rates(config), load, arch_of(config))


def random_source(
    size: str, device: str | None = "auto", dtype: str | None = "auto", arch: str = "voxcpm2"
) -> ModelSource:
    """Random weights of `size` and `arch` (tests and benchmarks without a checkpoint), made at `load`."""
    config = config_for_arch(arch, size)
    resolved_device = device_name(device)
    resolved_dtype = dtype_name(dtype, resolved_device)

    def load() -> LoadedModel:
        with stage(f"make random {size} weights on {resolved_device}"):
            return model_class(arch).random(size, device=resolved_device, dtype=resolved_dtype, config=config)

    return ModelSource(resolved_device, resolved_dtype, *_rates(config), load, arch)

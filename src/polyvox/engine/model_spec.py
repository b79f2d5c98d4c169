"""`ModelSpec`: which VoxCPM2 to load and where, as plain data an engine process can receive (a
`ModelSource` holds closures and cannot cross). Both sides turn it into a `ModelSource` with the same
factories (`checkpoint_source`, `random_source`): the API process to learn the rates and check the
checkpoint before listening, the engine process to load the weights."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from polyvox.models.checkpoint import device_name
from polyvox.models.model_source import ModelSource, checkpoint_source, on_hub, random_source
from polyvox.settings import Settings


@dataclass(frozen=True)
class ModelSpec:
    model: str | None = None  # checkpoint directory, Hugging Face repo id or modelscope:ORG/NAME
    random_weights: str | None = None  # or random weights of this size
    arch: str = "voxcpm2"  # the release random weights are made of (a checkpoint's is read from it)
    device: str = "auto"
    dtype: str = "auto"

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelSpec:
        devices = settings.devices
        device = devices[0] if devices else settings.device
        if settings.model:
            return cls(model=on_hub(settings.model, settings.model_hub), device=device, dtype=settings.dtype)
        return cls(
            random_weights=settings.random_weights or "tiny",
            arch=settings.arch,
            device=device,
            dtype=settings.dtype,
        )

    def model_id(self, arch: str) -> str:
        """What `/v1/models` calls the model: a checkpoint's release (`arch`, read from its config),
        or `ARCH-random-SIZE`."""
        return arch if self.model else f"{self.arch}-random-{self.random_weights}"

    def source(self) -> ModelSource:
        if self.model:
            return checkpoint_source(self.model, device=self.device, dtype=self.dtype)
        return random_source(
            self.random_weights or "tiny", device=self.device, dtype=self.dtype, arch=self.arch
        )

    def ranks(self, settings: Settings) -> list[ModelSpec]:
        """One spec per data-parallel rank: the `devices` named, or `data_parallel_size` ranks on this
        spec's device (CUDA: cuda:0, cuda:1, ...; the CPU: all on it)."""
        if settings.devices:
            return [dataclasses.replace(self, device=d) for d in settings.devices]
        size = settings.data_parallel_size
        device = device_name(self.device)
        if size > 1 and device.startswith("cuda"):
            return [dataclasses.replace(self, device=f"cuda:{rank}") for rank in range(size)]
        return [dataclasses.replace(self, device=device) for _ in range(size)]

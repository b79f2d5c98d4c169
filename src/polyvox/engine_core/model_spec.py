"""`ModelSpec`: which VoxCPM2 to load and where, as plain data an engine process can receive (a
`ModelSource` holds closures and cannot cross). Both sides turn it into a `ModelSource` with the same
factories (`checkpoint_source`, `random_source`): the API process to learn the rates and check the
checkpoint before listening, the engine process to load the weights."""

from __future__ import annotations

from dataclasses import dataclass

from polyvox.models.voxcpm2.model_source import ModelSource, checkpoint_source, random_source
from polyvox.settings import Settings


@dataclass(frozen=True)
class ModelSpec:
    model: str | None = None  # checkpoint directory or Hugging Face repo id
    random_weights: str | None = None  # or random weights of this size
    arch: str = "voxcpm2"  # the release random weights are made of (a checkpoint's is read from it)
    device: str = "auto"
    dtype: str = "auto"

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelSpec:
        device = settings.device
        if settings.model:
            return cls(model=settings.model, device=device, dtype=settings.dtype)
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

"""Optional `torch.compile` of what every step runs per patch: LocEnc and the LocDiT velocity
estimator (the parts the official `optimize()` compiles too) and the streaming VAE decode. They are
warmed up when the engine starts, so no request pays for compiling, and put back to eager if
compiling fails."""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from polyvox.models.interface import AudioVAE, SpeechLM
from polyvox.runtime.startup import Progress, stage

log = logging.getLogger(__name__)

# (module, method): LocEnc whole; of the LocDiT, what each solver step runs
COMPILED_METHODS = (("feat_encoder", "forward"), ("feat_decoder.estimator", "velocity"))
WARM_UP_BATCHES = (1, 2, 3)  # 1 is specialised; 2 then 3 makes the batch dimension dynamic
WARM_UP_PATCHES = (1, 2, 3)  # VAE latents: one patch per step, several when priming a continuation


def compile_step_modules(lm: SpeechLM, vae: AudioVAE, enabled: bool = True) -> bool:
    """Compile LocEnc, the LocDiT estimator and `vae.decode_stream` in place and warm them up
    (`enabled=False` puts the eager versions back). Returns whether the compiled versions are in use.

    Only bound methods are replaced, so parameter names, checkpoints and state_dicts are unchanged."""
    targets = [(lm.get_submodule(name), method) for name, method in COMPILED_METHODS]
    targets.append((vae, "decode_stream"))
    if not enabled:
        _uncompile(targets)
        return False
    for owner, method in targets:
        if method not in vars(owner):  # not compiled already (an engine restart reuses the model)
            setattr(owner, method, torch.compile(getattr(owner, method)))
    try:
        with stage("compile the step (torch.compile, warmed up on every batch shape)"):
            _warm_up(lm, vae)
    except Exception as exc:  # any compiler failure: serve eagerly rather than not at all
        log.warning("torch.compile failed (%s); the step runs eagerly", exc)
        _uncompile(targets)
        return False
    return True


def _uncompile(targets: list[tuple[nn.Module, str]]) -> None:
    for owner, method in targets:
        vars(owner).pop(method, None)  # back to the class's eager method


@torch.inference_mode()
def _warm_up(lm: SpeechLM, vae: AudioVAE) -> None:
    patch, dim = lm.patch_size, lm.feat_dim
    hidden = lm.config.lm_config.hidden_size
    options: dict[str, Any] = dict(device=lm.device, dtype=lm.dtype)
    # each shape compiles anew, for seconds to minutes: count them so a person sees it moving
    progress = Progress("compile", 2 * len(WARM_UP_BATCHES) + len(WARM_UP_PATCHES) - 1, "shapes")
    for batch in WARM_UP_BATCHES:
        lm.embed_patches(torch.zeros(batch, patch, dim, **options))
        lm.decode_patch(
            torch.zeros(batch, hidden, **options),
            torch.zeros(batch, hidden, **options),
            torch.zeros(batch, patch, dim, **options),
            torch.randn(batch, dim, patch, **options),
            torch.full((batch,), 2.0, **options),
            2,
        )
        progress.advance()
    vae_param = next(vae.parameters())
    for batch in WARM_UP_BATCHES:
        state = vae.init_stream_state(batch, vae_param.device, vae_param.dtype)
        vae.decode_stream(torch.zeros(batch, dim, patch, **options).to(vae_param.dtype), state)
        progress.advance()
    for patches in WARM_UP_PATCHES[1:]:
        state = vae.init_stream_state(1, vae_param.device, vae_param.dtype)
        vae.decode_stream(
            torch.zeros(1, dim, patches * patch, device=vae_param.device, dtype=vae_param.dtype), state
        )
        progress.advance()

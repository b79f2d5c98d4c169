"""Optional `torch.compile` of the per-patch modules — LocEnc and the LocDiT velocity estimator, the
parts the official `optimize()` compiles too — warmed up when the engine starts, so no request pays
for compiling, and dropped again (eager) if compiling fails."""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(__name__)

COMPILED_MODULES = ("feat_encoder", "feat_decoder.estimator")
WARM_UP_BATCHES = (1, 2, 3)  # 1 is specialised; 2 then 3 makes the batch dimension dynamic


def compile_patch_modules(lm, enabled: bool = True) -> bool:
    """Compile LocEnc and the LocDiT estimator of `lm` in place and warm them up at a few batch sizes
    (`enabled=False` puts the eager versions back). Returns whether the compiled versions are in use.

    Parameter names are unchanged (only each module's `forward` is replaced), so checkpoints and
    state_dicts still line up."""
    modules = [lm.get_submodule(name) for name in COMPILED_MODULES]
    if not enabled:
        _uncompile(modules)
        return False
    for module in modules:
        if "forward" not in vars(module):  # not compiled already (an engine restart reuses the model)
            module.forward = torch.compile(module.forward)
    try:
        _warm_up(lm)
    except Exception as exc:  # any compiler failure: serve eagerly rather than not at all
        log.warning("torch.compile failed (%s); LocEnc and LocDiT run eagerly", exc)
        _uncompile(modules)
        return False
    return True


def _uncompile(modules) -> None:
    for module in modules:
        vars(module).pop("forward", None)  # back to the class's eager forward


@torch.inference_mode()
def _warm_up(lm) -> None:
    patch, dim = lm.patch_size, lm.feat_dim
    hidden = lm.config.lm_config.hidden_size
    options = dict(device=lm.device, dtype=lm.dtype)
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

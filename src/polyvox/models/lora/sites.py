"""Where an adapter can act: every linear layer of a model under its official name, including each part
of a fused projection (polyvox computes q/k/v and gate/up as one matrix, the official model as several),
and which of them an adapter's config selects, by the official rules (`LoRAConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from polyvox.models.layers.fused_linear import FusedLinear

from .files import AdapterConfig

LM_SCOPES = ("base_lm.", "residual_lm.")
DIT_SCOPE = "feat_decoder.estimator."


@dataclass(frozen=True)
class Site:
    """One official linear layer: the polyvox module computing it, and its rows of that module's output."""

    module: str
    part: int
    out_start: int
    out_features: int
    in_features: int


def linear_sites(model: nn.Module) -> dict[str, Site]:
    """Official linear-layer name -> where polyvox computes it."""
    sites: dict[str, Site] = {}
    for name, module in model.named_modules():
        if isinstance(module, FusedLinear):
            parent = name.rpartition(".")[0]
            start = 0
            for index, (part, width) in enumerate(module.parts.items()):
                official = f"{parent}.{part}" if parent else part
                sites[official] = Site(name, index, start, width, module.in_features)
                start += width
        elif isinstance(module, nn.Linear):
            sites[name] = Site(name, 0, 0, module.out_features, module.in_features)
    return sites


def selected_sites(sites: dict[str, Site], config: AdapterConfig, default_proj: list[str]) -> list[str]:
    """The official names of the layers `config` adapts, as the official `_apply_lora` picks them: the
    LMs' and the LocDiT's linears by their last name, the projections by attribute name."""
    proj = config.target_proj_modules if config.target_proj_modules is not None else default_proj
    chosen = []
    for name in sites:
        short = name.rpartition(".")[2]
        if (
            (config.enable_lm and name.startswith(LM_SCOPES) and short in config.target_modules_lm)
            or (config.enable_dit and name.startswith(DIT_SCOPE) and short in config.target_modules_dit)
            or (config.enable_proj and "." not in name and name in proj)
        ):
            chosen.append(name)
    return chosen

"""One bias-free projection standing in for several that read the same input (q/k/v, gate/up): one
matrix multiply instead of three or two. State dicts keep the separate official names: saving
splits the weight into them, loading stacks them back (hooks on the module holding the projection,
which is where the loader looks for those names)."""

from __future__ import annotations

from functools import partial

import torch
from torch import nn


class FusedLinear(nn.Linear):
    """`parts` names each stacked projection (in output order) and its output width."""

    def __init__(self, in_features: int, parts: dict[str, int]) -> None:
        super().__init__(in_features, sum(parts.values()), bias=False)
        self.parts = dict(parts)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, parts={self.parts}"


def keep_official_names(holder: nn.Module, name: str) -> None:
    """Make `holder`'s state dict name the parts of its FusedLinear `name` separately."""
    holder.register_state_dict_post_hook(partial(_split_state, name))
    holder.register_load_state_dict_pre_hook(partial(_stack_state, name))


def _split_state(name: str, holder: nn.Module, state, prefix: str, local_metadata) -> None:
    """Replace the fused weight by its parts, in its place: the holder's keys keep the official order
    (q, k, v, o; gate, up, down), so code that walks a state dict in order sees the official one."""
    fused: FusedLinear = getattr(holder, name)
    key = f"{prefix}{name}.weight"
    keys = list(state)
    later = [k for k in keys[keys.index(key) + 1 :] if k.startswith(prefix)]
    pieces = state.pop(key).split(list(fused.parts.values()))
    for part, piece in zip(fused.parts, pieces, strict=True):
        state[f"{prefix}{part}.weight"] = piece
    for k in later:  # moved behind the parts
        state[k] = state.pop(k)


def _stack_state(
    name: str, holder: nn.Module, state, prefix, local_metadata, strict, missing, unexpected, errors
):
    fused: FusedLinear = getattr(holder, name)
    keys = [f"{prefix}{part}.weight" for part in fused.parts]
    if not all(k in state for k in keys):
        return  # incomplete (or already fused): the loader reports what is missing
    for key, width in zip(keys, fused.parts.values(), strict=True):
        if tuple(state[key].shape) != (width, fused.in_features):
            return  # left separate: the loader reports them as unexpected
    state[f"{prefix}{name}.weight"] = torch.cat([state.pop(k) for k in keys])

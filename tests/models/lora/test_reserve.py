"""With LoRA on, an engine reserves the device memory of every adapter slot (`lora_max_loaded` adapters of
`lora_max_rank`, for every layer an adapter could adapt) when it is built, before its KV cache is sized, so
an adapter loaded at run time takes no memory outside that budget; with LoRA off it reserves nothing and
refuses to load one."""

from __future__ import annotations

import pytest
from torch import nn

from polyvox.core.config import BatchingConfig
from polyvox.core.sequence import SamplingParams
from polyvox.engine.adapters import AdapterOptions
from polyvox.engine.options import WorkerOptions
from polyvox.models.layers.fused_linear import FusedLinear
from polyvox.models.lora.files import AdapterConfig
from polyvox.models.lora.random_adapter import write_random_adapter
from polyvox.models.prompt import build_prompt
from polyvox.models.voxcpm2.loaded_model import VoxCPM2

SLOTS, RANK = 2, 8
# every linear layer the official LoRAConfig can name: the LMs' and the LocDiT's attention and MLP, the
# LocDiT's own projections, and the model's projections and stop head
LAYERS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
EVERY_LAYER = AdapterConfig(
    enable_lm=True,
    enable_dit=True,
    enable_proj=True,
    r=RANK,
    target_modules_lm=LAYERS,
    target_modules_dit=[*LAYERS, "in_proj", "cond_proj", "out_proj"],
    target_proj_modules=[
        "enc_to_lm_proj",
        "lm_to_dit_proj",
        "res_to_dit_proj",
        "fusion_concat_proj",
        "stop_proj",
        "stop_head",
    ],  # fmt: skip
)


@pytest.fixture(scope="module")
def model() -> VoxCPM2:
    return VoxCPM2.random("tiny", device="cpu", dtype="float32")


def worker(model: VoxCPM2, adapters: AdapterOptions):
    model.lm.lora = None  # each test builds its engine on a model without a bank
    options = WorkerOptions(config=BatchingConfig(num_kv_blocks=64, kv_block_size=4), adapters=adapters)
    return options.worker(options.prompt_builder(model))


def full_bank_bytes(model: VoxCPM2) -> int:
    """Every slot (and the all-zero "no adapter" one) of every adaptable linear layer, from the model's own
    layers: rank columns per slot and per fused part, in both low-rank matrices."""
    lm, total = model.lm, 0
    for name, module in lm.named_modules():
        in_scope = name.startswith(("base_lm.", "residual_lm.", "feat_decoder.estimator.")) or "." not in name
        if not isinstance(module, nn.Linear) or not in_scope or name.startswith(lm.lora_shared_rows):
            continue
        parts = len(module.parts) if isinstance(module, FusedLinear) else 1
        width = parts * (SLOTS + 1) * RANK
        total += width * (module.in_features + module.out_features) * module.weight.element_size()
    return total


def storages(bank) -> set[int]:
    """The storages holding the adapter slots' tensors, by address."""
    return {t.untyped_storage().data_ptr() for s in bank._stacks.values() for t in (s.a, s.b)}


def test_lora_on_reserves_every_slot_up_front_and_a_run_time_load_allocates_nothing(
    model, tmp_path, tokenizer
):
    engine = worker(model, AdapterOptions(max_loaded=SLOTS, max_rank=RANK, enabled=True))
    bank = engine.adapters.bank
    assert bank is not None and bank.nbytes == full_bank_bytes(model)

    directory = write_random_adapter(model.lm, tmp_path / "every", EVERY_LAYER, model.lm.lora_default_proj)
    assert "error" not in engine.control("load_adapter", {"name": "every", "path": str(directory)})
    prompt = build_prompt(
        tokenizer, "hello", patch_size=model.config.patch_size, feat_dim=model.config.feat_dim
    )
    params = SamplingParams(seed=1, min_len=3, max_len=3, inference_timesteps=2, adapter="every")
    engine.core.generate([prompt], [params])  # the adapter made resident and used

    assert len(bank._stacks) == len(bank._storage)  # every reserved layer's slots were filled ...
    assert storages(bank) == {bank._reserved.untyped_storage().data_ptr()}  # ... inside the reservation
    assert bank.nbytes == full_bank_bytes(model)


def test_lora_off_reserves_nothing_and_refuses_a_load(model, tmp_path):
    engine = worker(model, AdapterOptions(max_loaded=SLOTS, max_rank=RANK))
    assert engine.adapters.bank is None and model.lm.lora is None
    directory = write_random_adapter(model.lm, tmp_path / "a", EVERY_LAYER, model.lm.lora_default_proj)
    answer = engine.control("load_adapter", {"name": "a", "path": str(directory)})
    assert "enable_lora" in answer["error"]

"""Adapters that do not fit the served model are refused at registration, the message naming the
adapter and what is wrong; nothing of them is served."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from helpers.official_lora import LM_AND_DIT, write_adapter
from polyvox.models.lora.files import AdapterError

from ..conftest import polyvox_twin


@pytest.fixture
def bank(official_lm, tiny_config):
    return polyvox_twin(official_lm, tiny_config).serve_adapters(max_loaded=2, max_rank=8)


@pytest.fixture
def copy(adapter_dirs, tmp_path):
    """A fresh copy of the valid `lm_dit` adapter to break."""
    target = tmp_path / "broken"
    shutil.copytree(adapter_dirs["lm_dit"], target)
    return target


def edit_weights(directory: Path, change) -> None:
    state = load_file(str(directory / "lora_weights.safetensors"))
    change(state)
    save_file(state, str(directory / "lora_weights.safetensors"))


def edit_config(directory: Path, **fields) -> None:
    body = json.loads((directory / "lora_config.json").read_text())
    body["lora_config"].update(fields)
    (directory / "lora_config.json").write_text(json.dumps(body))


def refused(bank, directory: Path, match: str) -> None:
    with pytest.raises(AdapterError, match=match):
        bank.register("alice", directory)
    assert "alice" not in bank
    assert bank.names() == []


def test_a_missing_tensor_is_refused(bank, copy):
    edit_weights(copy, lambda s: s.pop("base_lm.layers.1.self_attn.v_proj.lora_B"))
    refused(bank, copy, r"'alice': missing tensor base_lm\.layers\.1\.self_attn\.v_proj\.lora_B")


def test_a_rank_other_than_the_config_says_is_refused(bank, copy):
    edit_config(copy, r=2)
    refused(bank, copy, r"'alice': wrong rank: .*lora_A is \[4, 64\].*r=2")


def test_an_adapter_for_another_base_model_is_refused(bank, tiny_config, tokenizer_dir, tmp_path):
    wider = tiny_config.model_copy(
        update={"dit_config": tiny_config.dit_config.model_copy(update={"hidden_dim": 48})}
    )
    other = write_adapter(tmp_path / "wider", wider, tokenizer_dir, LM_AND_DIT, seed=1)
    refused(bank, other, r"'alice': feat_decoder\.estimator\..*q_proj is 32->32 in this model.*another base")


def test_a_tensor_for_a_layer_this_model_lacks_is_refused(bank, copy):
    def deeper(state):
        state["base_lm.layers.7.self_attn.q_proj.lora_A"] = state[
            "base_lm.layers.0.self_attn.q_proj.lora_A"
        ].clone()

    edit_weights(copy, deeper)
    refused(bank, copy, r"'alice': tensor base_lm\.layers\.7\.self_attn\.q_proj\.lora_A names no layer")


def test_a_rank_above_the_servers_limit_is_refused(official_lm, tiny_config, copy):
    small = polyvox_twin(official_lm, tiny_config).serve_adapters(max_loaded=2, max_rank=2)
    refused(small, copy, r"'alice': rank 4 is above this server's lora_max_rank 2")


def test_a_directory_without_weights_is_refused(bank, copy):
    (copy / "lora_weights.safetensors").unlink()
    refused(bank, copy, r"'alice': no lora_weights\.safetensors or lora_weights\.ckpt")


def test_a_corrupt_weights_file_is_refused(bank, copy):
    (copy / "lora_weights.safetensors").write_bytes(b"not a safetensors file")
    refused(bank, copy, r"'alice': its weights cannot be read")


def test_a_bad_config_is_refused(bank, copy):
    edit_config(copy, r="many")
    refused(bank, copy, r"'alice': lora_config\.json: r: ")


def test_a_path_that_is_not_a_directory_is_refused(bank, tmp_path):
    refused(bank, tmp_path / "nowhere", r"'alice': .*nowhere is not a directory")


def test_a_refused_replacement_keeps_the_adapter_already_loaded(bank, adapter_dirs, copy):
    bank.register("alice", adapter_dirs["lm_dit"])
    edit_config(copy, r=2)
    with pytest.raises(AdapterError):
        bank.register("alice", copy)
    assert bank.names() == ["alice"]

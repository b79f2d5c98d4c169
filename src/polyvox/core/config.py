"""The continuous-batching engine's configuration: one slotted dataclass with checked defaults."""

from __future__ import annotations

from dataclasses import dataclass

PREFILL_POLICIES = ("mixed", "separate", "adaptive")
ATTENTION_BACKENDS = ("auto", "sdpa", "flash")


@dataclass(slots=True)
class BatchingConfig:
    """Batching and memory limits of one engine instance.

    `num_kv_blocks` fixes the KV pool size; unset, the model runner sizes it from
    `gpu_memory_utilization` on CUDA and from `cpu_kv_cache_bytes` on CPU. `decode_audio=False`
    yields latents only (tests and benchmarks of the LM side). `prefill_policy`: as the setting
    of that name describes.
    `attention_backend` "auto" uses flash-attn for CUDA fp16/bf16 batches when it is installed.
    `compile` runs LocEnc, the LocDiT estimator and the VAE decode through torch.compile (at start).
    """

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    kv_block_size: int = 16
    num_kv_blocks: int | None = None
    gpu_memory_utilization: float = 0.9
    cpu_kv_cache_bytes: int = 2 << 30
    enable_prefix_caching: bool = True
    decode_audio: bool = True
    cuda_graphs: bool = True
    max_graph_batch: int = 256
    prefill_policy: str = "mixed"
    attention_backend: str = "auto"
    compile: bool = False

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1:
            raise ValueError("max_num_seqs must be at least 1")
        if self.kv_block_size < 1:
            raise ValueError("kv_block_size must be at least 1")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must be in (0, 1]")
        if self.prefill_policy not in PREFILL_POLICIES:
            raise ValueError(f"prefill_policy must be one of {', '.join(PREFILL_POLICIES)}")
        if self.attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention_backend must be one of {', '.join(ATTENTION_BACKENDS)}")
        if self.num_kv_blocks is not None and self.num_kv_blocks < 1:
            raise ValueError("num_kv_blocks must be at least 1")
        # every running request advances one position per step, so a step's budget must cover them all
        self.max_num_batched_tokens = max(self.max_num_batched_tokens, self.max_num_seqs)

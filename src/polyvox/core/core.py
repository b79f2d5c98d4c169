"""The synchronous engine: requests in, one `step()` at a time, patches and audio chunks out.

Each step schedules, runs the model once for every scheduled sequence, appends the new patches and
retires sequences that stopped (stop head after `min_len`, or `max_len` reached), as the official
batch-1 loop does. The async front end drives `step()` from its own thread.
"""

from __future__ import annotations

import dataclasses
import time

import msgspec
import numpy as np
import torch

from polyvox.core.block_manager import BlockManager
from polyvox.core.config import BatchingConfig
from polyvox.core.model_runner import ModelRunner, StepPatches
from polyvox.core.scheduler import Scheduler
from polyvox.core.sequence import PromptLike, SamplingParams, Sequence, SequenceStatus
from polyvox.core.stats import BATCH_SIZE_BOUNDS, STEP_SECONDS_BOUNDS, BatchingStats, bucket_of
from polyvox.models.interface import AudioVAE, SpeechConfig, SpeechLM


class StepOutput(msgspec.Struct, gc=False):
    """One patch of one request: its 48 kHz audio chunk and its latent `[D, P]` (float32, CPU), rows
    of the step's audio and latents taken only when read (the engine process sends the step's audio
    whole, and most consumers never read the latents).

    A step's outputs are the rows of `step_audio` and `step_latents` in order (`row`), so the whole
    step's audio can cross a process boundary as one buffer, without a copy per row. A struct, not a
    dataclass: one is made per row and step, and msgspec's are built in C and never tracked by the
    garbage collector (nothing in one refers back to it)."""

    seq_id: int
    request_id: str
    index: int
    finished: bool
    finish_reason: str | None
    step_audio: np.ndarray  # [B, samples] float32
    step_latents: torch.Tensor  # [B, D, P]
    row: int

    @property
    def audio(self) -> np.ndarray:
        return self.step_audio[self.row]

    @property
    def latent(self) -> torch.Tensor:
        return self.step_latents[self.row]


class StepFailed(RuntimeError):
    """The model failed during a step; the sequences it was running (`seq_ids`) were retired with it."""

    def __init__(self, seq_ids: list[int], cause: BaseException):
        super().__init__(f"engine step failed: {cause!r}")
        self.seq_ids = seq_ids


class EngineCore:
    def __init__(
        self,
        lm: SpeechLM,
        vae: AudioVAE,
        model_config: SpeechConfig,
        config: BatchingConfig,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.config = config
        self.runner = ModelRunner(lm, vae, model_config, config, device, dtype)
        self.max_positions = model_config.lm_config.max_position_embeddings
        self.block_manager = BlockManager(
            self.runner.num_kv_blocks, config.kv_block_size, config.enable_prefix_caching
        )
        self.scheduler = Scheduler(config, self.block_manager)
        self.scheduler.on_finish = self.runner.release
        # seconds of audio in one patch: latent frames per patch x waveform samples per frame
        self.scheduler.patch_s = model_config.patch_size * vae.decode_chunk_size / vae.out_sample_rate
        self.sequences: dict[int, Sequence] = {}
        self._steps = self._patches = 0
        self._step_time = self._last_step_s = 0.0
        self._last_batch = 0
        self._step_s_counts = [0] * (len(STEP_SECONDS_BOUNDS) + 1)
        self._batch_size_counts = [0] * (len(BATCH_SIZE_BOUNDS) + 1)

    def add_request(self, prompt: PromptLike, params: SamplingParams, request_id: str = "") -> Sequence:
        """Queue a request. Its `max_len` is cut to what fits the LM's positions (the RoPE table):
        a sequence is never fed a patch past them, however long it runs without a stop."""
        room = self.max_positions - int(prompt.tokens.shape[0])
        if room < 1:
            raise ValueError(f"the prompt ({prompt.tokens.shape[0]} positions) leaves no room to generate")
        if params.max_len > room:
            params = dataclasses.replace(params, max_len=room, min_len=min(params.min_len, room))
        adapter = self.runner.acquire_adapter(params.adapter) if params.adapter else None
        seq = Sequence(prompt, params, self.config.kv_block_size, request_id, adapter)
        self.scheduler.add(seq)
        self.sequences[seq.seq_id] = seq
        return seq

    def abort(self, seq_id: int) -> None:
        """Cancel a request: its KV blocks go back to the pool now."""
        seq = self.sequences.pop(seq_id, None)
        if seq is not None:
            self.scheduler.finish(seq, "cancelled")

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def step(self) -> list[StepOutput]:
        t0 = time.perf_counter()
        chunks = self.scheduler.schedule(t0)
        if not chunks:
            return []
        try:
            result = self.runner.run(chunks)
        except Exception as exc:
            # Only this step's sequences are suspect (their KV may be half written): retire them, so the
            # engine can go on with the rest.
            failed = list({id(c.seq): c.seq for c in chunks}.values())
            for seq in failed:
                self.scheduler.finish(seq, "error")
                self.sequences.pop(seq.seq_id, None)
            raise StepFailed([seq.seq_id for seq in failed], exc) from exc
        done_at = time.perf_counter()
        for c in chunks:
            c.seq.num_computed = c.end
            if c.start < c.seq.num_prompt_tokens:  # only prompt positions fill prefix-cache blocks
                self.block_manager.commit(c.seq)
        outputs = self._outputs(result, done_at) if result is not None else []
        self._steps += 1
        self._patches += len(outputs)
        self._last_batch = len(outputs)
        self._last_step_s = done_at - t0
        self._step_time += self._last_step_s
        self._step_s_counts[bucket_of(STEP_SECONDS_BOUNDS, self._last_step_s)] += 1
        self._batch_size_counts[bucket_of(BATCH_SIZE_BOUNDS, self._last_batch)] += 1
        # what a step costs lately (a moving average over every step), for the adaptive prefill policy
        last, estimate = self._last_step_s, self.scheduler.step_estimate_s
        self.scheduler.step_estimate_s = last if estimate == 0 else 0.8 * estimate + 0.2 * last
        return outputs

    def _outputs(self, result: StepPatches, done_at: float) -> list[StepOutput]:
        """Append each row's patch to its sequence and retire the ones that stopped; one output per row.
        Rows are referred to by index into the step's tensors: no tensor or copy per row."""
        latents = result.patches.float().transpose(1, 2).cpu()
        audio, patches = result.audio, result.patches
        outputs = []
        for row, (seq, stop) in enumerate(zip(result.seqs, result.stops, strict=True)):
            index = seq.patches.append(patches, row)
            if index == 0:
                seq.first_output_at = done_at
            reason = None
            if stop and index > seq.params.min_len:
                reason = "stop"
            elif index + 1 >= seq.params.max_len:
                reason = "length"
            if reason:
                self.scheduler.finish(seq, reason)
                self.sequences.pop(seq.seq_id, None)
            outputs.append(
                StepOutput(seq.seq_id, seq.request_id, index, bool(reason), reason, audio, latents, row)
            )
        return outputs

    def stats(self) -> BatchingStats:
        bm = self.block_manager
        steps = max(self._steps, 1)
        return BatchingStats(
            running=len(self.scheduler.running),
            waiting=len(self.scheduler.waiting),
            kv_blocks_total=bm.num_blocks,
            kv_blocks_used=bm.num_used,
            kv_blocks_free=bm.num_free,
            prefix_cache_queries=bm.prefix_queries,
            prefix_cache_hits=bm.prefix_hits,
            prefix_cache_hit_rate=bm.prefix_hits / bm.prefix_queries if bm.prefix_queries else 0.0,
            preemptions=self.scheduler.num_preemptions,
            steps=self._steps,
            patches=self._patches,
            last_batch_size=self._last_batch,
            last_step_s=self._last_step_s,
            mean_batch_size=self._patches / steps,
            mean_step_s=self._step_time / steps,
            step_s_counts=list(self._step_s_counts),
            step_s_total=self._step_time,
            batch_size_counts=list(self._batch_size_counts),
        )

    def generate(
        self, prompts: list[PromptLike], params: list[SamplingParams]
    ) -> list[tuple[torch.Tensor, np.ndarray]]:
        """Run requests to completion (tests, benchmarks): per request its latents `[D, T*P]` and audio."""
        seqs = [self.add_request(p, sp) for p, sp in zip(prompts, params, strict=True)]
        latents: dict[int, list[torch.Tensor]] = {s.seq_id: [] for s in seqs}
        audio: dict[int, list[np.ndarray]] = {s.seq_id: [] for s in seqs}
        while any(s.status is not SequenceStatus.FINISHED for s in seqs):
            for out in self.step():
                latents[out.seq_id].append(out.latent)
                audio[out.seq_id].append(out.audio)
        return [(torch.cat(latents[s.seq_id], dim=1), np.concatenate(audio[s.seq_id])) for s in seqs]

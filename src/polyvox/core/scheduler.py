"""Which sequences compute which positions in the next step, under the token, sequence and KV budgets.

Running sequences go first, oldest first, one position each (or their next prefill chunk); waiting
ones are admitted strictly in arrival order, so nothing starves. Long prompts are chunked by the token
budget so one clone reference cannot stall every stream. Whether new prompts share a step with the
running streams is `prefill_policy` (its setting in settings/fields.py says how each policy works).
When KV blocks run out, the newest running sequence is preempted and later re-prefilled from its prompt and
the patches it made.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import msgspec

from polyvox.core.block_manager import BlockManager
from polyvox.core.config import BatchingConfig
from polyvox.core.sequence import Sequence, SequenceStatus

ADAPTIVE_MARGIN_STEPS = 3.0  # "adaptive": a prompt-only step needs this many step times of slack


class ScheduledChunk(msgspec.Struct, gc=False):
    """KV positions `start..end` of `seq` to compute this step. A struct, not a dataclass: one is made
    per running sequence and step, and msgspec's are built in C and never tracked by the garbage
    collector (nothing in one refers back to it)."""

    seq: Sequence
    start: int
    end: int

    @property
    def completes(self) -> bool:
        return self.end == self.seq.num_tokens

    @property
    def is_decode(self) -> bool:
        """A single generated patch fed back (the LMs' one-token `advance`)."""
        return self.end - self.start == 1 and self.start >= self.seq.num_prompt_tokens


class Scheduler:
    def __init__(self, config: BatchingConfig, block_manager: BlockManager):
        self.max_num_seqs = config.max_num_seqs
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.policy = config.prefill_policy
        self._last_prefills_only = False  # a prompt-only step is always followed by a full one
        # "adaptive" reads these: audio seconds per patch, and the engine's recent step time
        self.patch_s = 0.16
        self.step_estimate_s = 0.0
        self.block_manager = block_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self.on_finish: Callable[[Sequence], None] | None = None  # frees what a sequence holds elsewhere

    def add(self, seq: Sequence) -> None:
        need = self.block_manager.blocks_for(seq.num_prompt_tokens + seq.params.max_len)
        if need > self.block_manager.num_blocks:
            raise ValueError(
                f"request needs {need} KV blocks at full length; the pool has {self.block_manager.num_blocks}"
            )
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self, now: float | None = None) -> list[ScheduledChunk]:
        """The next step's chunks; `now` is the engine clock (`time.perf_counter()` by default)."""
        if not self._last_prefills_only and self._prefills_alone(now):
            prefills = self._schedule_prefills_only()
            if prefills:
                self._last_prefills_only = True
                return prefills
        self._last_prefills_only = False
        budget = self.max_num_batched_tokens
        chunks: list[ScheduledChunk] = []
        preempted = False
        i = 0
        block_size = self.block_manager.block_size
        running = self.running  # shrinks from its end when sequences are preempted
        while i < len(running) and budget > 0:
            seq = running[i]
            start = seq.num_computed
            todo = seq.num_tokens - start
            end = start + (todo if todo < budget else budget)
            if end > len(seq.block_table) * block_size:  # a new block: preempt the newest until one is free
                while not self.block_manager.ensure_capacity(seq, end):
                    self._preempt(running.pop())
                    preempted = True
                    if i == len(running):
                        break
                if i == len(running):  # the newest was this one
                    break
            chunks.append(ScheduledChunk(seq, start, end))
            budget -= end - start
            i += 1
        if not preempted:
            self._admit(chunks, budget)
        return chunks

    def _prefills_alone(self, now: float | None) -> bool:
        """Whether prompt work gets a step of its own now (the policy's choice)."""
        if self.policy != "adaptive":
            return self.policy == "separate"
        if not self.waiting and all(s.first_output_at is not None for s in self.running):
            return False  # no prompt work
        now = time.perf_counter() if now is None else now
        need = ADAPTIVE_MARGIN_STEPS * self.step_estimate_s
        ahead = (s.audio_ahead_s(now, self.patch_s) for s in self.running)
        return all(a is None or a >= need for a in ahead)

    def _schedule_prefills_only(self) -> list[ScheduledChunk]:
        """Prompt chunks alone: running sequences still prefilling, then admissible waiting ones."""
        budget = self.max_num_batched_tokens
        chunks: list[ScheduledChunk] = []
        for seq in self.running:
            if budget <= 0:
                break
            if seq.num_tokens - seq.num_computed > 1 or seq.num_computed < seq.num_prompt_tokens:
                end = seq.num_computed + min(seq.num_tokens - seq.num_computed, budget)
                if not self.block_manager.ensure_capacity(seq, end):
                    return []  # memory pressure: the mixed path preempts
                chunks.append(ScheduledChunk(seq, seq.num_computed, end))
                budget -= end - seq.num_computed
        self._admit(chunks, budget)
        return chunks

    def _admit(self, chunks: list[ScheduledChunk], budget: int) -> None:
        """Admit waiting sequences in arrival order while the budget, `max_num_seqs` and blocks allow."""
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if not self.block_manager.can_allocate(seq):
                break
            self.waiting.popleft()
            self.block_manager.allocate(seq)
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            end = seq.num_computed + min(seq.num_tokens - seq.num_computed, budget)
            chunks.append(ScheduledChunk(seq, seq.num_computed, end))
            budget -= end - seq.num_computed

    def finish(self, seq: Sequence, reason: str) -> None:
        """Drop a sequence for good (stopped, reached max length, or cancelled); its blocks free at once."""
        if seq.status is SequenceStatus.FINISHED:
            return
        if seq.status is SequenceStatus.RUNNING:
            self.running.remove(seq)
        else:
            self.waiting.remove(seq)
        self.block_manager.free(seq)
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
        if self.on_finish is not None:
            self.on_finish(seq)

    def _preempt(self, seq: Sequence) -> None:
        self.block_manager.free(seq)
        seq.reset_for_recompute()
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

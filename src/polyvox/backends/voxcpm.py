"""`VoxCPMBackend`: a VoxCPM model of any release (VoxCPM2, VoxCPM 1.5, VoxCPM-0.5B) behind the Backend
contract, the API side of it.

It checks requests (`validate`), says what the model is (`info`, known before the weights load) and
hands requests to an `Engine`: the batching engine in a thread of this process (`InThreadEngine`), or
in engine processes of their own, one per data-parallel rank (`DataParallelEngine`, `engine_process`).
The engine side (prompts, reference encoding with its cache, sampling parameters, the engine core)
is `engine.worker.EngineWorker`, the same in both. Chunks are 160 ms of 48 kHz audio.

This is the engine's edge: a `SynthesisRequest` becomes an `EngineRequest` here (`engine_request`), and
what the engine raises becomes the API side's errors (`api_errors`); the engine knows nothing of either.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from polyvox.backends.adapter_files import files_info, read_adapter_files
from polyvox.backends.base import (
    OPENAI_VOICES,
    AdapterInfo,
    Backend,
    BackendCapabilities,
    BackendInfo,
    EngineRank,
    PromptCacheStats,
    ReferenceAudio,
    SynthesisRequest,
)
from polyvox.backends.errors import (
    AudioLost,
    BackendError,
    BackendInputError,
    BackendOverloaded,
    PieceLost,
)
from polyvox.core.config import BatchingConfig
from polyvox.core.errors import EngineError, EngineInputError, EngineOverloaded
from polyvox.core.stats import BatchingStats
from polyvox.engine.adapters import AdapterOptions
from polyvox.engine.contract import Engine
from polyvox.engine.limits import DEFAULT_MAX_PATCHES, REFERENCE_CACHE_SIZE, SHORTEST_INPUT
from polyvox.engine.link import EngineDied, LostMidAudio
from polyvox.engine.options import WorkerOptions
from polyvox.engine.request import EngineReference, EngineRequest
from polyvox.engine.stats import combined_stats
from polyvox.models.architectures import clones_from_clip_alone, designs_voices
from polyvox.models.lora.files import AdapterError
from polyvox.runtime.logs import LogFormat
from polyvox.runtime.startup import StartupError
from polyvox.settings import Settings
from polyvox.settings.guidance import (
    CFG_VALUE_MAX,
    CFG_VALUE_MIN,
    INFERENCE_TIMESTEPS_MAX,
    INFERENCE_TIMESTEPS_MIN,
    cfg_value_in_range,
    inference_timesteps_in_range,
)
from polyvox.text.emotion import style_description

if TYPE_CHECKING:
    from polyvox.core.async_core import AsyncEngineCore
    from polyvox.engine.data_parallel import DataParallelEngine
    from polyvox.engine.in_thread import InThreadEngine
    from polyvox.engine.model_spec import ModelSpec
    from polyvox.models.interface import Prompt, SpeechModel
    from polyvox.models.model_source import ModelSource

MAX_REFERENCE_SECONDS = 60.0


class VoxCPMBackend(Backend):
    def __init__(
        self,
        model: SpeechModel | ModelSource,
        config: BatchingConfig | None = None,
        *,
        model_id: str = "voxcpm2",
        cfg_value: float = 2.0,
        inference_timesteps: int = 10,
        max_patches: int = DEFAULT_MAX_PATCHES,
        prompt_cache_size: int = REFERENCE_CACHE_SIZE,
        torch_threads: int | None = None,
        adapters: AdapterOptions | None = None,
        processes: EngineProcesses | None = None,
    ):
        """`model` loads in the engine at start when it is a ModelSource, so the server answers while
        it loads; `adapters`: the LoRA slots, and the adapters every rank loads when it starts. The
        engine is chosen here, once: in engine processes as `processes` describes them, else in a thread
        of this process built from `model`."""
        # PyTorch's intra-op threads (process-wide, set in the engine at start); None leaves PyTorch's
        # default. On a CPU, as many threads as cores fight the server's encoding threads for them.
        self.options = WorkerOptions(
            config=config or BatchingConfig(),
            cfg_value=cfg_value,
            inference_timesteps=inference_timesteps,
            max_patches=max_patches,
            prompt_cache_size=prompt_cache_size,
            torch_threads=torch_threads,
            adapters=adapters or AdapterOptions(),
        )
        # what the API side knows of the loaded adapters; the engine ranks hold their weights
        self._adapters = {name: files_info(files) for name, files in self.options.adapters.loaded.items()}
        self.engine: Engine
        if processes is None:
            from polyvox.engine.in_thread import InThreadEngine

            self.engine = InThreadEngine(model, self.options)
        else:  # PyTorch stays out of this process: the engine ranks import it
            self.engine = processes.engine(self.options)
        self.arch = model.arch  # voxcpm2, voxcpm1.5 or voxcpm1: the prompt modes it has
        self.info = BackendInfo(
            name=self.arch,
            model_id=model_id,
            sample_rate=model.sample_rate,
            capabilities=BackendCapabilities(
                cloning=True, voice_design=designs_voices(self.arch), lora=self.options.adapters.serving
            ),
            reference_rate=model.reference_rate,
            voices=OPENAI_VOICES,
            languages=("en", "zh"),
            extra={"device": str(model.device), "dtype": str(model.dtype).removeprefix("torch.")},
        )

    @classmethod
    def from_settings(
        cls, settings: Settings, engine_sockets: str | None = None, connect: bool = False
    ) -> VoxCPMBackend:
        """`engine_sockets`: the directory the engine ranks' sockets go in; `connect`: the ranks there
        belong to the launcher (an API process behind `api_server_count`), this back end only connects."""
        from polyvox.engine.model_spec import ModelSpec

        spec = ModelSpec.from_settings(settings)
        source = spec.source()
        options = worker_options(settings, source)
        processes = None
        if settings.engine_process:
            processes = EngineProcesses.from_settings(settings, spec, engine_sockets, connect)
        elif len(spec.ranks(settings)) > 1:
            raise StartupError("data parallel (data_parallel_size, devices) needs engine_process on")
        values = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
        return cls(source, model_id=spec.model_id(source.arch), processes=processes, **values)

    # ------------------------------------------------------------------ what it was built with

    @property
    def config(self) -> BatchingConfig:
        return self.options.config

    @property
    def cfg_value(self) -> float:
        return self.options.cfg_value

    @property
    def inference_timesteps(self) -> int:
        return self.options.inference_timesteps

    @property
    def max_patches(self) -> int:
        return self.options.max_patches

    @property
    def prompt_cache_size(self) -> int:
        return self.options.prompt_cache_size

    @property
    def torch_threads(self) -> int | None:
        return self.options.torch_threads

    @property
    def prompt_encodes(self) -> int:
        return self.prompt_cache_stats().encodes

    @property
    def prompt_cache_hits(self) -> int:
        return self.prompt_cache_stats().hits

    # the in-thread engine's parts, for tests that reach into it
    @property
    def model(self) -> SpeechModel:
        engine = self._in_thread()
        if engine.prompts is None:
            raise RuntimeError("the VoxCPM2 model is not loaded yet")
        return engine.prompts.model

    @property
    def _step_loop(self) -> AsyncEngineCore | None:
        return self._in_thread().step_loop

    def _prompt(self, request: SynthesisRequest) -> Prompt:
        engine = self._in_thread()
        if engine.prompts is None:
            raise RuntimeError("the VoxCPM2 model is not loaded yet")
        return engine.prompts.prompt(engine_request(request, designs=self.info.capabilities.voice_design))

    def _in_thread(self) -> InThreadEngine:
        from polyvox.engine.in_thread import InThreadEngine

        if not isinstance(self.engine, InThreadEngine):
            raise RuntimeError("the engine runs in processes of its own")
        return self.engine

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        await self.engine.start()

    async def stop(self) -> None:
        await self.engine.stop()

    @property
    def ready(self) -> bool:
        return self.engine.ready

    async def until_ready(self, ready: bool = True) -> None:
        await self.engine.ready_signal.until(lambda: self.engine.ready == ready)

    @property
    def restarts_itself(self) -> bool:
        return self.engine.restarts_itself

    def stats(self) -> BatchingStats | None:
        """The batching engine's counters (running, waiting, KV blocks, prefix hits, step time...), summed
        over the data-parallel ranks that are up."""
        return combined_stats([rank.stats for rank in self.engine.ranks()])

    def engine_ranks(self) -> list[EngineRank]:
        return self.engine.ranks()

    def prompt_cache_stats(self) -> PromptCacheStats:
        return self.engine.prompt_cache_stats()

    # ------------------------------------------------------------------ requests

    def validate(self, request: SynthesisRequest) -> None:
        if request.cfg_value is not None and not cfg_value_in_range(request.cfg_value):
            raise BackendInputError(
                f"cfg_value must be {CFG_VALUE_MIN:g} to {CFG_VALUE_MAX:g}", param="cfg_value"
            )
        timesteps = request.inference_timesteps
        if timesteps is not None and not inference_timesteps_in_range(timesteps):
            raise BackendInputError(
                f"inference_timesteps must be {INFERENCE_TIMESTEPS_MIN} to {INFERENCE_TIMESTEPS_MAX}",
                param="inference_timesteps",
            )
        if not 0 < request.temperature <= 10:
            raise BackendInputError("temperature must be in (0, 10]", param="temperature")
        if request.max_patches is not None and request.max_patches < 1:
            raise BackendInputError("max_patches must be at least 1", param="max_patches")
        self.info.capabilities.check_emotion(request.emotion, self.arch)
        if request.instructions and not self.info.capabilities.voice_design:
            raise BackendInputError(
                f"{self.arch} has no voice design: `instructions` cannot describe a voice on this model "
                "(serve a VoxCPM2 checkpoint, or set instructions_mode=ignore to drop them)",
                param="instructions",
                code="voice_design_unsupported",
            )
        ref = request.reference
        if ref is not None and not ref.transcript and not clones_from_clip_alone(self.arch):
            raise BackendInputError(
                f"{self.arch} clones a voice only by continuing a transcribed clip: give the reference "
                "audio's transcript (ref_text, or a voice stored with its transcript)",
                param="ref_text",
                code="cloning_unsupported",
            )
        if ref is not None:
            if ref.samples.size == 0 or ref.sample_rate <= 0:
                raise BackendInputError("the reference audio is empty", param="reference")
            if ref.samples.size / ref.sample_rate > MAX_REFERENCE_SECONDS:
                raise BackendInputError(
                    f"the reference audio is longer than {MAX_REFERENCE_SECONDS:.0f} s", param="reference"
                )

    async def check_voice(self, reference: ReferenceAudio) -> None:
        """Refuse a voice this model could never speak with: what `validate` refuses of a clip (no
        transcript where the release needs one, too long), and a clip and transcript that leave no room
        in a prompt to speak even the shortest input, which every request with the voice would be
        refused for. The engine, which holds the tokenizer and the model's limits, counts the
        positions; BackendError while it (or one of its ranks) is not up."""
        self.validate(SynthesisRequest(text=SHORTEST_INPUT, reference=reference))
        seconds = reference.samples.size / reference.sample_rate
        with api_errors():
            answers = await self.engine.control(
                "voice_room", transcript=reference.transcript, seconds=seconds
            )
        room = answers[0]  # every rank serves the same model
        if room["positions"] < room["limit"]:
            return
        words = room["transcript"]
        longer = "transcript" if words >= room["positions"] - words else "reference"
        raise BackendInputError(
            f"this voice leaves no room to speak: with the shortest input its prompt takes "
            f"{room['positions']} positions ({words} of them its transcript's) and this model can use "
            f"{room['limit']}: "
            + ("shorten the transcript" if longer == "transcript" else "use a shorter clip"),
            param=longer,
            code="voice_too_long",
        )

    # ------------------------------------------------------------------ LoRA adapters

    def adapters(self) -> dict[str, AdapterInfo]:
        return dict(self._adapters)

    async def load_adapter(self, name: str, path: str) -> AdapterInfo:
        """Read the adapter's files here, then load it on every rank (each checks it against its model);
        ranks that start later (a restart) load it too."""
        try:
            files = await asyncio.to_thread(read_adapter_files, name, path)
        except AdapterError as exc:
            raise BackendInputError(str(exc), param="path", code="invalid_adapter") from exc
        # a rank still starting was spawned with the adapters of before: it would come up without this one
        if not all(rank.up for rank in self.engine.ranks()):
            raise BackendError("an engine rank is starting or restarting: load the adapter once all are up")
        with api_errors():
            answers = await self.engine.control("load_adapter", name=name, path=path)
            errors = [answer["error"] for answer in answers if "error" in answer]
            if errors and name not in self._adapters:  # no rank keeps half of a refused adapter
                await self.engine.control("unload_adapter", name=name)
        if errors:
            raise BackendInputError(errors[0], param="path", code="invalid_adapter")
        info = AdapterInfo(**answers[0])
        self.options.adapters.loaded[name] = files  # what a rank restarting registers
        self._adapters[name] = info
        return info

    async def unload_adapter(self, name: str) -> bool:
        if name not in self._adapters:
            return False
        self.options.adapters.loaded.pop(name, None)
        del self._adapters[name]
        if self.engine.ready:
            with api_errors():
                await self.engine.control("unload_adapter", name=name)
        return True

    async def generate(self, request: SynthesisRequest) -> AsyncGenerator[np.ndarray, None]:
        """The piece's audio. Validated once, before it runs: the text front end's `checked` (the server
        calls it as it prepares a request) has `validate` each piece, so it is not validated again here."""
        outputs = self.engine.generate(engine_request(request, designs=self.info.capabilities.voice_design))
        try:
            with api_errors():
                async for chunk in outputs:
                    yield chunk
        finally:
            await outputs.aclose()  # type: ignore[attr-defined]


def engine_request(request: SynthesisRequest, designs: bool = True) -> EngineRequest:
    """What the engine uses of a request (voice, speed and text normalisation were applied above it).
    A model that `designs` voices hears the emotion as a style in its description; one that does not
    was let through only `neutral`, its voices' one delivery, which asks nothing of it."""
    ref = request.reference
    return EngineRequest(
        text=request.text,
        instructions=style_description(request.instructions, request.emotion if designs else None),
        seed=request.seed,
        cfg_value=request.cfg_value,
        inference_timesteps=request.inference_timesteps,
        temperature=request.temperature,
        max_patches=request.max_patches,
        min_patches=request.min_patches,
        reference=None
        if ref is None
        else EngineReference(ref.samples, ref.sample_rate, ref.content_hash, ref.transcript),
        lora=request.lora,
        request_id=request.request_id,
        piece=request.piece,
    )


@contextmanager
def api_errors() -> Iterator[None]:
    """What the engine raises, as the API side's errors (the server turns each into one HTTP answer)."""
    try:
        yield
    except EngineInputError as exc:
        raise BackendInputError(exc.message, param=exc.param, code=exc.code) from exc
    except EngineOverloaded as exc:
        raise BackendOverloaded(str(exc)) from exc
    except LostMidAudio as exc:
        raise AudioLost(str(exc)) from exc
    except EngineDied as exc:  # before any of the request's audio came back
        raise PieceLost(str(exc)) from exc
    except EngineError as exc:
        raise BackendError(str(exc)) from exc


@dataclass(frozen=True)
class EngineProcesses:
    """The engine in processes of its own, one per data-parallel rank (`DataParallelEngine`): the ranks'
    models, the log setup they start with, and where their sockets are (`connect`: the launcher's, which
    an API process behind `api_server_count` only connects to); `hang_timeout_s`: `engine_hang_timeout_s`."""

    ranks: list[ModelSpec]
    logging_setup: tuple[str, LogFormat]
    socket_dir: str | None = None
    connect: bool = False
    hang_timeout_s: float = 0.0

    @classmethod
    def from_settings(
        cls, settings: Settings, spec: ModelSpec, socket_dir: str | None = None, connect: bool = False
    ) -> EngineProcesses:
        logging_setup = (settings.log_level, settings.log_format)
        return cls(spec.ranks(settings), logging_setup, socket_dir, connect, settings.engine_hang_timeout_s)

    def engine(self, options: WorkerOptions) -> DataParallelEngine:
        from polyvox.engine.data_parallel import DataParallelEngine

        return DataParallelEngine(
            self.ranks,
            options,
            self.logging_setup,
            socket_dir=self.socket_dir,
            connect=self.connect,
            hang_timeout_s=self.hang_timeout_s,
        )


def engine_ranks(settings: Settings, socket_dir: str) -> DataParallelEngine:
    """The engine ranks `settings` select, in processes of their own with their sockets in `socket_dir`,
    without a back end around them: what the launcher of `api_server_count` API processes owns."""
    from polyvox.engine.model_spec import ModelSpec

    spec = ModelSpec.from_settings(settings)
    options = worker_options(settings, spec.source())
    return EngineProcesses.from_settings(settings, spec, socket_dir).engine(options)


def worker_options(settings: Settings, source: ModelSource) -> WorkerOptions:
    """What the engine is built with besides the model, from `settings`; the LoRA adapters named at start
    are read here, once (a rank restarting registers these, whatever became of the directories).
    StartupError for an adapter that cannot be used."""
    threads = settings.torch_threads
    if threads is None and source.device == "cpu":
        threads = max(1, (os.cpu_count() or 1) // 2)
    try:
        loaded = {name: read_adapter_files(name, path) for name, path in settings.lora.items()}
    except AdapterError as exc:
        raise StartupError(f"--lora: {exc}") from exc
    return WorkerOptions(
        config=batching_config(settings),
        cfg_value=settings.cfg_value,
        inference_timesteps=settings.inference_timesteps,
        prompt_cache_size=settings.voice_prompt_cache_size,
        torch_threads=threads,
        adapters=AdapterOptions(
            settings.lora_max_loaded, settings.lora_max_rank, loaded, enabled=settings.enable_lora
        ),
    )


def batching_config(settings: Settings) -> BatchingConfig:
    return BatchingConfig(
        max_num_seqs=settings.max_num_seqs,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        kv_block_size=settings.kv_block_size,
        num_kv_blocks=settings.num_kv_blocks,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        prefill_policy=settings.prefill_policy,
        cuda_graphs=settings.cuda_graphs,
        attention_backend=settings.attention_backend,
        compile=settings.torch_compile,
    )

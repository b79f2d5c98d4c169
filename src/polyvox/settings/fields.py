"""`Settings`: every polyvox setting, with its default and its checks, and the order its sources are
read in: explicit values (CLI flags), environment variables, the config file (`--config`, passed as
`Settings(_config_file=path)`, else the one `POLYVOX_CONFIG` names: `config_file.py`), then the
defaults below. A few settings also answer to the names
users of uttera-tts-vllm already have in their `.env` files, meaning what they meant there
(`uttera.py`); polyvox's own names win over them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from polyvox.settings.config_file import CONFIG_FILE_ARGUMENT, ConfigFileSource, config_path
from polyvox.settings.guidance import (
    CFG_VALUE_MAX,
    CFG_VALUE_MIN,
    INFERENCE_TIMESTEPS_MAX,
    INFERENCE_TIMESTEPS_MIN,
)
from polyvox.settings.uttera import UtteraCacheTTLSource


def _alias(name: str, *legacy: str) -> AliasChoices:
    """`POLYVOX_NAME`, then uttera-tts-vllm's names. Not the bare field name: the environment is read
    without regard to case, so `name` would let an unprefixed `CACHE_DIR` or `MAX_NUM_SEQS` in, ahead
    of `POLYVOX_*`. Flags and config files still use the field name (populate_by_name)."""
    return AliasChoices(f"POLYVOX_{name.upper()}", *legacy)


class Settings(BaseSettings):
    """Every polyvox setting, with its default. The README's configuration table mirrors this class."""

    # An empty variable is an unset one (AUDIO_CACHE_DIR= means the default directory, not the current one).
    model_config = SettingsConfigDict(
        env_prefix="POLYVOX_", populate_by_name=True, extra="ignore", env_ignore_empty=True
    )

    # network
    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, ge=0, le=65535, description="TCP port to listen on.")
    wyoming_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Also serve the Wyoming protocol (Home Assistant's TTS) on this TCP port, in the same "
        "process and on the same engine, voices and cache as HTTP (docs/home-assistant.md). Unset: off.",
    )
    wyoming_host: str = Field(
        "127.0.0.1",
        description="Address the Wyoming port listens on. Wyoming has no authentication: beyond loopback, "
        "anyone who reaches the port speaks (a warning is logged at start).",
    )
    wyoming_api_key_name: str | None = Field(
        None,
        description="The named key (polyvox keys create) whose voices, limits and usage Wyoming requests "
        "count against. Unset: those of the settings' keys (every key's voices, no limits), or anyone's "
        "on an open server.",
    )

    # model selection
    model: str | None = Field(
        None,
        description="VoxCPM checkpoint directory, Hugging Face repo id or modelscope:ORG/NAME (VoxCPM2, "
        "VoxCPM 1.5 or VoxCPM-0.5B: the release is read from its config.json); unset serves the embedded "
        "voice.",
    )
    model_hub: Literal["huggingface", "modelscope"] = Field(
        "huggingface",
        description="Where a bare repo id in `model` (ORG/NAME) is found: the Hugging Face Hub (HF_HOME's "
        "cache, HF_HUB_OFFLINE) or ModelScope (MODELSCOPE_CACHE; needs polyvox[modelscope]). A prefix "
        "says it for one model: `modelscope:OpenBMB/VoxCPM2`.",
    )
    random_weights: Literal["tiny", "full"] | None = Field(
        None, description="Serve VoxCPM2 with random weights of this size (tests and benchmarks)."
    )
    arch: Literal["voxcpm1", "voxcpm1.5", "voxcpm2"] = Field(
        "voxcpm2",
        description="The VoxCPM release random_weights are made of (voxcpm1 is VoxCPM-0.5B); a checkpoint's "
        "release is read from its config.json.",
    )
    device: str = Field("auto", description="Torch device for VoxCPM2: auto, cpu, cuda, cuda:N.")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "auto", description="VoxCPM2 weight dtype; auto is bfloat16 on CUDA and float32 on CPU."
    )

    # authentication (no key configured anywhere: the server is open)
    api_key: str | None = Field(None, description="One API key (kept for compatibility; adds to api_keys).")
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="API keys accepted as `Authorization: Bearer <key>` (env: comma-separated).",
    )
    api_keys_file: Path | None = Field(
        None, description="File of API keys, one per line (# comments); read at start."
    )
    admin_api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Keys for /admin/* and voice management; unset: any API key may use them.",
    )
    require_api_key: bool = Field(
        False,
        description="Require an API key on every request even when no key exists yet (refused 503 until "
        "one is made with `polyvox keys create`). Unset, a server requires keys when any exists as it "
        "starts; once it does it never opens again. Set it on every replica of a cluster.",
    )
    public_model_list: bool = Field(
        False,
        description="Let GET /v1/models, /v1/models/{id}, /v1/audio/models, /v1/audio/voices and /v1/voices "
        "answer without a key when keys are on (Open WebUI lists models and voices without one).",
    )

    # audio cache
    cache_enabled: bool = Field(True, description="Cache synthesised audio on disk.")
    cache_dir: Path | None = Field(
        None,
        validation_alias=_alias("cache_dir", "AUDIO_CACHE_DIR"),
        description="Audio cache directory (alias AUDIO_CACHE_DIR); unset: ~/.cache/polyvox/audio.",
    )
    cache_ttl_minutes: float = Field(
        1440.0,
        ge=0,
        validation_alias=_alias("cache_ttl_minutes"),
        description="Minutes a cached answer stays valid; 0: no expiry. uttera-tts-vllm's CACHE_TTL_MINUTES "
        "is read when this is unset, with its own meaning: 0 or less turns the cache off.",
    )
    cache_max_bytes: int = Field(
        2_147_483_648, ge=0, description="Size cap of the audio cache; least recently used entries go first."
    )

    # state shared by replicas
    state_url: str | None = Field(
        None,
        description="Redis URL (redis://host:port/db) holding what replicas share: the audio cache, voices, "
        "consents, builtin-voice freezes and the lexicon. Unset: local directories only.",
    )
    state_sync_interval_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description="How often a replica syncs voices and the lexicon with state_url (and retries it "
        "while unreachable), in seconds; without state_url, how often a server reloads voices.json and "
        "lexicon_path when another server sharing them changed them.",
    )

    # privacy and lifecycle
    log_request_text: bool = Field(False, description="Log request text (default: only its length and hash).")
    shutdown_grace_s: float = Field(
        30.0, ge=0, description="On SIGTERM, how long in-flight requests may take to finish."
    )

    # OpenAI compatibility
    accept_any_model: bool = Field(
        False,
        description="Serve a speech request whatever its `model`; off: a model id not in /v1/models is a "
        "404 `model_not_found`, as OpenAI answers.",
    )

    # request limits and admission control
    max_input_chars: int = Field(
        4096, ge=1, description="Longest accepted `input` (and `instructions`, `ref_text`), in characters."
    )
    max_concurrent_requests: int = Field(
        64, ge=1, description="Syntheses running at once; more wait in the queue."
    )
    max_queue: int = Field(256, ge=0, description="Requests allowed to wait; past it the server answers 429.")
    max_request_bytes: int = Field(
        26_214_400, ge=1024, description="Largest accepted request body (uploads included), in bytes."
    )
    request_timeout_s: float = Field(300.0, gt=0, description="Deadline for one request, in seconds.")
    request_read_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Seconds a client may take to send a request's headers, and then its whole body; past "
        "either the server answers 408 and closes the connection (so a stalled client cannot hold one).",
    )
    max_upload_bytes: int = Field(
        20_971_520, ge=1024, description="Largest accepted voice or clone reference upload, in bytes."
    )

    # voices
    voices_dir: Path | None = Field(
        None,
        description="Voices state directory (voices.json, registered and uploaded clips, frozen builtin "
        "prompts); unset: ~/.local/share/polyvox/voices.",
    )
    builtin_voices_file: Path | None = Field(
        None, description="JSON file of builtin voice designs; unset: the one shipped with polyvox."
    )
    voice_min_seconds: float = Field(1.0, gt=0, description="Shortest accepted voice or reference clip.")
    voice_max_seconds: float = Field(60.0, gt=0, description="Longest accepted voice or reference clip.")
    voice_freeze_max_patches: int = Field(
        75, ge=1, description="Longest builtin voice prompt generated on first use, in 160 ms patches."
    )
    freeze_voices_at_start: bool = Field(
        False,
        description="Freeze every builtin voice not frozen yet as a start-up stage, before `/ready` turns "
        "200 (engines that design voices), so no first request for a builtin voice waits seconds for "
        "its freeze; the deployment files turn it on. Off by default: each freeze costs seconds on a "
        "CPU. A voice that fails to freeze at start is frozen on first use.",
    )
    warmup: bool = Field(
        False,
        description="Before `/ready` turns 200, do what the first requests would otherwise pay for: freeze "
        "the builtin voices (as freeze_voices_at_start), send one short request through every engine rank, "
        "and on CUDA capture the decode step's graphs for batches of 1 to 64 per rank; each part is a "
        "start-up stage in the log. The deployment files turn it on.",
    )
    voice_prompt_cache_size: int = Field(
        64, ge=1, description="Encoded voice prompts (VAE latents) kept in memory, by audio content hash."
    )

    # what requests may change
    instructions_mode: Literal["design", "ignore"] = Field(
        "design",
        description="What a request's `instructions` do: design the voice on VoxCPM2 (restyle it, for a "
        "voice with a reference clip), or nothing (ignore: for clients that always send some, as "
        "openai-agents).",
    )
    instructions_mode_by_voice: Annotated[dict[str, Literal["design", "ignore"]], NoDecode] = Field(
        default_factory=dict,
        description="Per-voice exceptions to instructions_mode, as `voice=mode` pairs "
        "(env: comma-separated, or a JSON object).",
    )
    default_sample_rate: Annotated[int, Field(ge=8000, le=48000)] | Literal["native"] = Field(
        24000,
        description="Output rate of wav, flac, mp3, opus and aac when a request names none: a number, or "
        "native (the engine's own rate), fitted to what each codec carries; pcm stays at 24000.",
    )

    # VoxCPM2 generation defaults
    cfg_value: float = Field(
        2.0, ge=CFG_VALUE_MIN, le=CFG_VALUE_MAX, description="Default classifier-free guidance value."
    )
    inference_timesteps: int = Field(
        10,
        ge=INFERENCE_TIMESTEPS_MIN,
        le=INFERENCE_TIMESTEPS_MAX,
        validation_alias=_alias("inference_timesteps", "VOXCPM_INFERENCE_TIMESTEPS"),
        description="Default CFM solver steps (alias VOXCPM_INFERENCE_TIMESTEPS).",
    )

    # continuous batching engine
    gpu_memory_utilization: float = Field(
        0.9,
        gt=0,
        le=1,
        validation_alias=_alias("gpu_memory_utilization", "VLLM_GPU_MEM_UTIL"),
        description="Share of GPU memory the engine may use (alias VLLM_GPU_MEM_UTIL).",
    )
    max_num_seqs: int = Field(
        256,
        ge=1,
        validation_alias=_alias("max_num_seqs", "VLLM_MAX_NUM_SEQS"),
        description="Most requests decoded in one step (alias VLLM_MAX_NUM_SEQS).",
    )
    max_num_batched_tokens: int = Field(
        8192,
        ge=16,
        validation_alias=_alias("max_num_batched_tokens", "VLLM_MAX_NUM_BATCHED_TOKENS"),
        description="Token budget of one step's prefill (alias VLLM_MAX_NUM_BATCHED_TOKENS).",
    )
    kv_block_size: int = Field(16, ge=1, description="Tokens per KV-cache block.")
    prefill_policy: Literal["mixed", "separate", "adaptive"] = Field(
        "mixed",
        description="New requests' prompts run in the same step as running requests' next patches "
        "(mixed), in steps of their own (separate), or in their own only while every running stream "
        "is ahead of real time by a few step times (adaptive); measured in BENCHMARKS.md.",
    )
    cuda_graphs: bool = Field(True, description="Capture decode steps as CUDA graphs (CUDA only).")
    torch_compile: bool = Field(
        False,
        description="Compile LocEnc, the LocDiT estimator and the VAE decode with torch.compile at start "
        "(slower start, faster steps).",
    )
    torch_threads: int | None = Field(
        None,
        ge=1,
        description="Threads for the VoxCPM2 engine's PyTorch work on the CPU; unset: half the cores "
        "(at least one), leaving the rest to encoding and HTTP (unset on CUDA: PyTorch's default).",
    )
    embedded_workers: int | None = Field(
        None,
        ge=1,
        description="Sentences the embedded voice synthesises at once, shared fairly by all requests; unset: "
        "one per usable core, each on one ONNX thread (fewer workers share the spare cores as threads).",
    )
    encode_threads: int | None = Field(
        None,
        ge=1,
        description="Threads that resample and encode response audio beside the event loop, shared by every "
        "stream (each stream's chunks stay in order); unset: one per usable core.",
    )
    attention_backend: Literal["auto", "sdpa", "flash"] = Field(
        "auto",
        description="Paged attention on CUDA fp16/bf16: flash-attn when installed (auto), or PyTorch SDPA.",
    )
    num_kv_blocks: int | None = Field(
        None, ge=1, description="Explicit KV-cache size in blocks; unset sizes it from memory."
    )
    engine_process: bool = Field(
        True,
        description="Run VoxCPM2's batching engine in a process of its own per data-parallel rank, apart "
        "from HTTP, text and encoding (a crashed engine is restarted; the server keeps answering); off: "
        "in a thread of the server's process.",
    )
    idle_unload_s: float | None = Field(
        None,
        gt=0,
        description="Release the engine (weights and KV cache: engine processes exit) after this many "
        "seconds without a speech request; the next request loads it again, waiting within its deadline, "
        "and /ready answers 200 cold meanwhile. Unset: never. Not with api_server_count > 1.",
    )
    load_on_demand: bool = Field(
        False,
        description="Start without loading the engine: the first speech request loads it (a cold start; "
        "/ready answers 200 cold until then). Not with api_server_count > 1.",
    )
    data_parallel_size: int = Field(
        1,
        ge=1,
        le=64,
        description="VoxCPM2 engines behind one server (engine_process), each with its own model copy "
        "and KV cache: on CUDA one per GPU (cuda:0, cuda:1, ...), on the CPU all on it.",
    )
    api_server_count: int = Field(
        1,
        ge=1,
        le=64,
        description="API server processes sharing the listening port in front of the same engine ranks "
        "(HTTP, text front end and encoding scale with them): a launcher owns the port and the engines and "
        "restarts either when they die. Each admits max_concurrent_requests/N, queues max_queue/N (rounded "
        "up) and keeps the disk audio cache under cache_max_bytes/N; /metrics sums them all; LoRA "
        "adapters are fixed at start (--lora).",
    )
    devices: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="One VoxCPM2 engine per device named (comma-separated, e.g. cuda:0,cuda:1); overrides "
        "device and data_parallel_size.",
    )
    engine_hang_timeout_s: float = Field(
        120.0,
        ge=0,
        description="An engine process (engine_process) that holds requests and makes no step for this "
        "many seconds is taken as hung (alive but stuck) and killed, then restarted as one that died, its "
        "requests with no audio yet sent again; 0: never. Generous by default: a step on a busy device, or "
        "one that compiles, can take seconds.",
    )

    # LoRA adapters (VoxCPM fine-tunes)
    lora: Annotated[dict[str, Path], NoDecode] = Field(
        default_factory=dict,
        description="LoRA adapters to serve, NAME=DIR, each a directory the official fine-tuning wrote "
        "(repeatable flag; env: comma-separated). Each is also a voice named NAME.",
        json_schema_extra={"repeatable": True},
    )
    enable_lora: bool = Field(
        False,
        description="Serve LoRA adapters: reserve device memory for lora_max_loaded adapters of "
        "lora_max_rank before the KV cache is sized, and let /admin/lora load adapters at run time. On "
        "when --lora names any.",
    )
    lora_max_loaded: int = Field(
        4,
        ge=1,
        le=64,
        description="LoRA adapters held on the device at once (more may be registered: the least recently "
        "used is swapped out).",
    )
    lora_max_rank: int = Field(
        32, ge=1, le=1024, description="Largest LoRA rank served; the device slots are sized by it."
    )

    # text front end and long text
    lexicon_path: Path | None = Field(
        None, description="Pronunciation lexicon (JSON); the admin API saves edits there. Unset: in memory."
    )
    normalize: bool = Field(
        True, description="Spell out numbers, dates and symbols before synthesis (requests may override)."
    )
    max_piece_chars: int = Field(
        200, ge=20, description="Longest piece of text generated at once; longer input is split at sentences."
    )
    piece_lookahead: int = Field(
        1, ge=0, description="Pieces generated ahead of the one streaming (long text and WebSocket sessions)."
    )
    crossfade_ms: float = Field(10.0, ge=0, le=200, description="Fade at the seams between pieces, in ms.")

    # word timestamps
    aligner: str = Field(
        "estimate",
        min_length=1,
        description="How the VoxCPM family finds words inside each piece for word timestamps: estimate (the "
        "piece's exact length shared by spoken length, every word marked approximate; any language, free), "
        "pocketsphinx (English, found in the audio) or a CTC model's directory or hub id. The embedded voice "
        "times its words itself.",
    )

    ui: bool = Field(True, description="Serve the web playground at / and /ui (its API calls need a key).")

    metrics_compat: Literal["none", "uttera"] = Field(
        "none",
        description="Also export another server's series on /metrics, for dashboards built on them: uttera "
        "(uttera-tts-vllm's uttera_tts_* names and labels).",
    )

    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level.")
    log_format: Literal["text", "json"] = Field(
        "text",
        description="Log lines as text, or one JSON object per line; a request's lines carry its request id.",
    )
    otel_traces: bool = Field(
        False,
        description=(
            "Export OpenTelemetry traces (needs polyvox[otel]): a span per HTTP request, with a speech "
            "request's text front end, queue wait, engine, first audio and encoding, and an engine "
            "process's own spans; exported as the OTEL_* variables say (OTEL_EXPORTER_OTLP_ENDPOINT)."
        ),
    )

    @field_validator("api_keys", "admin_api_keys", "devices", mode="before")
    @classmethod
    def _key_list(cls, value: Any) -> Any:
        """Keys from the environment come as one comma-separated (or JSON list) string."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [key.strip() for key in text.split(",") if key.strip()]
        return value

    @field_validator("lora", mode="before")
    @classmethod
    def _lora_dirs(cls, value: Any) -> Any:
        """`NAME=DIR` pairs: repeated flags (a list), comma-separated text, or a JSON object."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("{"):
                return json.loads(text)
            value = text.split(",")
        if isinstance(value, list):
            pairs = {}
            for item in (str(v).strip() for v in value):
                if not item:
                    continue
                name, sep, directory = item.partition("=")
                if not sep or not name.strip() or not directory.strip():
                    raise ValueError(f"{item!r} is not NAME=DIR")
                pairs[name.strip()] = directory.strip()
            return pairs
        return value

    @field_validator("instructions_mode_by_voice", mode="before")
    @classmethod
    def _voice_modes(cls, value: Any) -> Any:
        """`narrator=ignore,guide=design` or a JSON object."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("{"):
                return json.loads(text)
            modes = {}
            for pair in (pair.strip() for pair in text.split(",") if pair.strip()):
                name, sep, mode = pair.partition("=")
                if not sep or not name.strip():
                    raise ValueError(f"{pair!r} is not VOICE=MODE (e.g. narrator=ignore)")
                modes[name.strip()] = mode.strip()
            return modes
        return value

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        path = config_path(init_settings.init_kwargs.get(CONFIG_FILE_ARGUMENT))
        config_file = ConfigFileSource(settings_cls, path)
        return (
            init_settings,
            env_settings,
            UtteraCacheTTLSource(settings_cls, init_settings, env_settings, config_file),
            dotenv_settings,
            config_file,
            file_secret_settings,
        )

"""The settings in groups, as `serve --help` and docs/configuration.md show them: each group is named by
its first setting and holds the settings that follow it in `Settings` up to the next group's first."""

from __future__ import annotations

from polyvox.settings.fields import Settings

# (title, first setting), in the order of Settings' fields
GROUPS: tuple[tuple[str, str], ...] = (
    ("Network", "host"),
    ("Model", "model"),
    ("Authentication", "api_key"),
    ("Audio cache", "cache_enabled"),
    ("State shared by replicas", "state_url"),
    ("Privacy and lifecycle", "log_request_text"),
    ("OpenAI compatibility", "accept_any_model"),
    ("Request limits and admission control", "max_input_chars"),
    ("Voices", "voices_dir"),
    ("What requests may change", "instructions_mode"),
    ("VoxCPM2 generation defaults", "cfg_value"),
    ("Continuous batching engine", "gpu_memory_utilization"),
    ("LoRA adapters (VoxCPM fine-tunes)", "lora"),
    ("Text front end and long text", "lexicon_path"),
    ("Word timestamps", "aligner"),
    ("Playground, metrics, logs and traces", "ui"),
)


def grouped_settings() -> list[tuple[str, list[str]]]:
    """(title, setting names) for every group, covering every setting once, in Settings' order."""
    names = list(Settings.model_fields)
    starts = [names.index(first) for _, first in GROUPS]  # ValueError: a group's first setting is gone
    if starts != sorted(starts) or starts[0] != 0:
        raise ValueError("GROUPS must follow the order of Settings' fields, from its first")
    ends = [*starts[1:], len(names)]
    return [(title, names[start:end]) for (title, _), start, end in zip(GROUPS, starts, ends, strict=True)]

"""Settings as command-line flags: one `--flag` per Settings field for `serve`, only those it uses for
`say`; settings read from flags over environment over config file; and the parser whose usage errors
are one line.

Not pydantic-settings' `CliSettingsSource` (2.16), which lacks what `serve --help` and `say` show: it
puts every top-level field in one "options" group (its groups are nested models; ours are the flat
fields grouped as docs/configuration.md groups them, `settings.groups`), it adds every field to every
parser (`CliSuppress` hides a field everywhere, not only from `say`), and a bad value raises its
`SettingsError` or pydantic's `ValidationError` from inside `Settings()`, where `settings_from_args`
knows which flag gave the value and `invalid_settings` names it in one line."""

from __future__ import annotations

import argparse
import types
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal, NoReturn, Union, get_args, get_origin

from pydantic import ValidationError

from polyvox.settings import Settings

# What `polyvox say` reads (one utterance, in this process): the model and its engine, LoRA adapters,
# the text front end and logging; the server's network, keys, limits, cache, voices and sharing are not.
SAY_SETTINGS = (
    "model",
    "model_hub",
    "random_weights",
    "arch",
    "device",
    "dtype",
    "cfg_value",
    "inference_timesteps",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "kv_block_size",
    "num_kv_blocks",
    "cuda_graphs",
    "torch_compile",
    "torch_threads",
    "attention_backend",
    "embedded_workers",
    "lora",
    "enable_lora",
    "lora_max_loaded",
    "lora_max_rank",
    "lexicon_path",
    "normalize",
    "max_piece_chars",
    "piece_lookahead",
    "crossfade_ms",
    "log_level",
    "log_format",
)


class Parser(argparse.ArgumentParser):
    """argparse with a usage error as one line: the usage of every flag (over sixty lines for `serve`)
    would bury the one thing wrong."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _flag_type(annotation: Any) -> tuple[Callable[[str], Any], tuple[Any, ...] | None]:
    """The argparse `type` and `choices` for a Settings field's annotation (Optional unwrapped)."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(members) > 1:
            return str, None  # e.g. a number or "native": the Settings field validates the text
        annotation = members[0]
    if get_origin(annotation) in (list, dict):
        return str, None  # one comma-separated value; the Settings validator splits it
    if get_origin(annotation) is Literal:
        choices = get_args(annotation)
        return type(choices[0]), choices
    return annotation, None


def add_settings_flags(parser: argparse.ArgumentParser, names: Iterable[str] | None = None) -> None:
    """One `--flag` per Settings field named (e.g. `--max-num-seqs`; all of them by default), in the
    groups of docs/configuration.md (`settings.groups`), plus `--config FILE` and `--debug`."""
    from polyvox.settings.groups import grouped_settings

    group = parser.add_argument_group(
        "settings", "Every setting is also a POLYVOX_* environment variable (docs/configuration.md)."
    )
    group.add_argument(
        "--config", metavar="FILE", help="TOML or JSON settings file (same as POLYVOX_CONFIG)."
    )
    group.add_argument(
        "--debug",
        action="store_true",
        help="Log at debug level, and show the Python traceback of a failure to start.",
    )
    wanted = set(Settings.model_fields if names is None else names)
    for title, members in grouped_settings():
        shown = [name for name in members if name in wanted]
        if shown:
            section = parser.add_argument_group(title)
            for name in shown:
                _add_flag(section, name)


def _add_flag(group: argparse._ArgumentGroup, name: str) -> None:
    field = Settings.model_fields[name]
    flag = "--" + name.replace("_", "-")
    kind, choices = _flag_type(field.annotation)
    help_text = field.description or ""
    if "(default" not in help_text:  # a description may say its default in its own words
        help_text += f" (default: {field.get_default(call_default_factory=True)})"
    if kind is bool:
        action = argparse.BooleanOptionalAction
        group.add_argument(flag, dest=name, action=action, default=argparse.SUPPRESS, help=help_text)
    elif isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("repeatable"):
        group.add_argument(
            flag, dest=name, action="append", default=argparse.SUPPRESS, metavar="VALUE", help=help_text
        )
    else:
        metavar = name.upper() if choices is None else None
        group.add_argument(
            flag,
            dest=name,
            type=kind,
            choices=choices,
            default=argparse.SUPPRESS,
            metavar=metavar,
            help=help_text,
        )


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Settings from flags over environment over config file (`--config`, else the one `POLYVOX_CONFIG`
    names) over defaults."""
    config = getattr(args, "config", None)
    overrides = {name: getattr(args, name) for name in Settings.model_fields if hasattr(args, name)}
    if getattr(args, "debug", False):
        overrides.setdefault("log_level", "debug")
    try:
        return Settings(**overrides, _config_file=config)
    except ValidationError as exc:
        from polyvox.settings.errors import invalid_settings

        raise invalid_settings(exc, flags=overrides, config_file=config) from exc

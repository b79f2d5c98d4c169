"""Invalid settings told as lines a person can act on: each names the setting, the value, where the
value came from (a flag, an environment variable, the config file and its line) and what is wrong;
likewise a file a setting names that cannot be read at start (`files_named_by`; a file read by a layer
above, such as the lexicon, raises `InvalidSettings` itself where it is read)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import get_origin

from pydantic import AliasChoices, ValidationError

from polyvox.runtime.startup import StartupError
from polyvox.settings import Settings
from polyvox.settings.config_file import config_path, line_of

_SECRET_WORDS = ("key",)  # values of these settings are never echoed


class InvalidSettings(StartupError):
    """One or more settings have values polyvox cannot use."""


def invalid_settings(
    error: ValidationError, flags: Collection[str] = (), config_file: Path | None = None
) -> InvalidSettings:
    """The error of `Settings(...)` as one line per bad value; `flags` are the settings given as flags,
    `config_file` the file given with `--config` (without it, the one `POLYVOX_CONFIG` names)."""
    config = config_path(config_file)
    lines = []
    for problem in error.errors():
        name = field_name(str(problem["loc"][0])) if problem["loc"] else "settings"
        entry = _entry(name, problem["loc"])
        shown = "" if any(word in name for word in _SECRET_WORDS) else f"{entry} = {problem['input']!r}"
        lines.append(f"  {name}{shown} (from {source_of(name, flags, config)}): {problem['msg']}")
    return InvalidSettings(
        "invalid settings:\n"
        + "\n".join(lines)
        + "\nsee `polyvox serve --help` or the configuration table in README.md for the values each takes"
    )


def _entry(name: str, location: tuple[int | str, ...]) -> str:
    """`['narrator']` for an entry of a mapping setting (instructions_mode_by_voice, lora) that is wrong;
    otherwise nothing (pydantic's other locations name its own validators, not the user's values)."""
    field = Settings.model_fields.get(name)
    if field is None or get_origin(field.annotation) is not dict or len(location) < 2:
        return ""
    return f"[{location[1]!r}]"


def field_name(location: str) -> str:
    """The setting an error's location names: pydantic names an aliased setting by its first alias."""
    if location in Settings.model_fields:
        return location
    for name, field in Settings.model_fields.items():
        if isinstance(field.validation_alias, AliasChoices):
            choices = {str(choice).lower() for choice in field.validation_alias.choices}
            if location.lower() in choices:
                return name
    return location


def source_of(name: str, flags: Collection[str] = (), config: Path | None = None) -> str:
    """Where the value of setting `name` came from, highest precedence first (`config`: the config file
    read, if any)."""
    if name in flags:
        return "--" + name.replace("_", "-")
    present = {variable.upper(): variable for variable in os.environ}  # read case-insensitively
    for variable in environment_names(name):
        if variable in present:
            return f"environment variable {present[variable]}"
    if config is not None:
        line = line_of(config, name)
        return f"config file {config}" + (f", line {line}" if line is not None else "")
    return "the defaults"


def environment_names(name: str) -> list[str]:
    """The environment variables that set `name`: POLYVOX_NAME and any uttera-tts-vllm alias."""
    field = Settings.model_fields.get(name)
    alias = field.validation_alias if field is not None else None
    names = [f"POLYVOX_{name.upper()}"]
    if isinstance(alias, AliasChoices):
        names += [choice.upper() for choice in alias.choices if isinstance(choice, str) and choice != name]
    return list(dict.fromkeys(names))


@contextlib.contextmanager
def files_named_by(settings: Settings) -> Iterator[None]:
    """Turn a file that a setting names and that cannot be read in the block (an API keys file, a
    lexicon...) into InvalidSettings naming the setting."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            raise
        name = _setting_naming(settings, Path(exc.filename))
        if name is None:
            raise InvalidSettings(f"cannot read {exc.filename}: {exc.strerror or exc}") from exc
        raise InvalidSettings(
            f"{name} = {exc.filename}: {exc.strerror or exc}; point it at a readable file, or unset it"
        ) from exc


def _setting_naming(settings: Settings, path: Path) -> str | None:
    """The setting whose value is `path`, if one is."""
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if isinstance(value, str | Path) and Path(value) == path:
            return name
    return None
